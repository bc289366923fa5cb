# Entry point on the board: bind the table firmware to the Pico's pins and run it.
# The watchdog resets a hung board; a crash is printed (REPL/mpremote) and the board resets.
# A bad configuration file (pins.json, wheel.json, key.txt, table.txt) is found before the
# watchdog starts: it is printed, the LED blinks three times a second, and the board stays at
# the REPL (a reset would only find it again, in a loop, before any frame goes out).
# A file named "nowdt" on the board starts it without the watchdog, for debugging at the REPL.
import os
import sys

import board_pico
import machine

blinker = None  # the Timer blinking a configuration error: kept while the REPL runs


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def main():
    global blinker
    try:
        board = board_pico.Board(watchdog=not _exists("nowdt"))
    except board_pico.ConfigError as e:
        blinker = board_pico.show_config_error(e)
        return
    except KeyboardInterrupt:
        raise
    except Exception as e:
        sys.print_exception(e)
        machine.reset()
    try:
        board.run()
    except KeyboardInterrupt:
        raise  # Ctrl-C from mpremote: stay at the REPL for debugging
    except Exception as e:  # anything else: log it, then start again clean
        sys.print_exception(e)
        machine.reset()


main()
