# Runs the test_* functions of one firmware test module under MicroPython, printing one
# result line per test for tests/test_micropython.py to read. Used as:
#   mprun.mjs ... --script tests/fw/mpyrun.py -- MODULE
import io
import sys

MARK = "@@RMC-TEST"


def main():
    name = sys.argv[1]
    mod = __import__(name)
    tests = [k for k in dir(mod) if k.startswith("test_") and callable(getattr(mod, k))]
    for test in sorted(tests):
        try:
            getattr(mod, test)()
        except Exception as e:  # every failure is reported, none stops the run
            buf = io.StringIO()
            sys.print_exception(e, buf)
            text = buf.getvalue().replace("\n", "\\n")
            print("%s %s FAIL %s" % (MARK, test, text))
        else:
            print("%s %s PASS" % (MARK, test))
    print("%s __end__ DONE" % MARK)


main()
