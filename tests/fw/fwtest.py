# Tiny test helpers usable under both CPython and MicroPython (no pytest there).
import os


def raises(exc_type, func, *args, **kwargs):
    """Call func and return the exception it raised; fail unless it is an exc_type."""
    try:
        func(*args, **kwargs)
    except exc_type as e:
        return e
    raise AssertionError("%s not raised by %r" % (exc_type.__name__, func))


_counter = [0]


def scratch_dir(prefix="t"):
    """A fresh empty folder below the current one (a tmp dir on CPython's test run)."""
    _counter[0] += 1
    path = "%s%d" % (prefix, _counter[0])
    _rmtree(path)
    os.mkdir(path)
    return path


def _rmtree(path):
    try:
        entries = os.listdir(path)
    except OSError:
        return
    for name in entries:
        full = path + "/" + name
        try:
            os.remove(full)
        except OSError:
            _rmtree(full)
    os.rmdir(path)


class Line:
    """The line to the host: every frame the table writes, decoded by take()."""

    def __init__(self):
        self.data = bytearray()

    def __call__(self, b):
        self.data.extend(b)

    def take(self):
        from rmcfw import frames

        out = [frames.decode(x) for x in bytes(self.data).split(b"\n") if x]
        self.data = bytearray()
        return out
