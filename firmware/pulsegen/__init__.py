# Pulse generator of the test rig (docs/rig.md): core.py is portable, board_pico.py binds it.
