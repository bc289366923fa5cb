# main.py of the rig's pulse-generator Pico: deploy firmware/pulsegen/ as :pulsegen/ and this
# file as :main.py (docs/rig.md, `rmc rig deploy-pulsegen`).
from pulsegen import board_pico

board_pico.main()
