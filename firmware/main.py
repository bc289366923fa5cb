# Entry point on the board: bind the table firmware to the Pico's pins and run it.
# The watchdog resets a hung board; a crash is printed (REPL/mpremote) and the board resets.
# A file named "nowdt" on the board starts it without the watchdog, for debugging at the REPL.
import os
import sys

import board_pico
import machine


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def main():
    try:
        board_pico.Board(watchdog=not _exists("nowdt")).run()
    except KeyboardInterrupt:
        raise  # Ctrl-C from mpremote: stay at the REPL for debugging
    except Exception as e:  # anything else: log it, then start again clean
        sys.print_exception(e)
        machine.reset()


main()
