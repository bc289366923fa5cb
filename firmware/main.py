# Entry point on the board: bind the table firmware to the Pico's pins and run it.
# The watchdog resets a hung board; a crash is printed (REPL/mpremote) and the board resets.
import sys

import board_pico
import machine


def main():
    try:
        board_pico.Board().run()
    except KeyboardInterrupt:
        raise  # Ctrl-C from mpremote: stay at the REPL for debugging
    except Exception as e:  # anything else: log it, then start again clean
        sys.print_exception(e)
        machine.reset()


main()
