# ruff: noqa: RUF005  (MicroPython source: tuple concatenation kept)
# Run at every boot of the virtual board, before boot.py: makes the WebAssembly port look
# like a board to the firmware and to mpremote.
#  - `machine` (simulated) is imported once so that `import machine` finds it anywhere;
#  - `time` gets the virtual clock (module attributes can be replaced);
#  - `os` and `open` raise MicroPython's errno numbers, not Emscripten's, and `os.stat("")`
#    means the current folder, as on a board; directories have size 0, ilistdir gives sizes;
import builtins
import os
import sys
import time

import _vbhw
import machine
import vfs as _vfs

for _name in ("ticks_us", "ticks_ms", "sleep", "sleep_ms", "sleep_us", "time", "time_ns"):
    setattr(time, _name, getattr(machine, _name))
time.ticks_cpu = machine.ticks_us
_localtime = time.localtime
_gmtime = time.gmtime


def _lt(secs=None):
    return _localtime(machine.time() if secs is None else secs)


def _gt(secs=None):
    return _gmtime(machine.time() if secs is None else secs)


time.localtime = _lt
time.gmtime = _gt

# Emscripten errno -> MicroPython errno. Only errors of the WebAssembly file system itself are
# translated: a file system the program mounted (os.mount of a Python object, mpremote's
# /remote) raises its own numbers, which pass unchanged (its ENOENT 2 is not Emscripten's EACCES).
_ERRNO = {44: 2, 20: 17, 31: 21, 54: 20, 55: 39, 28: 22, 63: 1, 2: 13, 10: 16, 29: 5}


def _fix(e):
    if e.args and e.args[0] in _ERRNO:
        return OSError(_ERRNO[e.args[0]])
    return e


def _user_fs(path):
    """True if `path` lies on a file system the program mounted, not on the board's flash."""
    mounts = _vfs.mount()
    if len(mounts) < 2:
        return False  # only the flash, at /
    if not isinstance(path, str):
        return False
    if not path.startswith("/"):
        try:
            path = _getcwd().rstrip("/") + "/" + path
        except Exception:  # a mounted object without getcwd: the cwd is on it
            return True
    for _fs, where in mounts:
        if where != "/" and (path == where or path.startswith(where + "/")):
            return True
    return False


# Writing flash takes time on a board: each operation that changes the file system first
# advances the virtual clock, so that a power cut in a trace can fall between two of them
# (e.g. after a new file is written, before it is renamed over the old one).
_FLASH_OP_US = machine._CFG.get("flash_op_us", 0)


_fs_dirty = _vbhw.fs_dirty
_fs_changed = _vbhw.fs_changed


def _flash_op():
    _fs_dirty()  # the Node side keeps a copy of the files, refreshed when they change
    if _FLASH_OP_US and not machine._state[0]:
        machine._sleep_us(_FLASH_OP_US)


def _wrap(fn, empty_is_cwd=False, writes=False):
    def call(*args):
        if args and _user_fs(args[0]):
            return fn(*args)  # the mounted object's own errors, unchanged
        if empty_is_cwd and args and args[0] == "":
            args = (_getcwd(),) + args[1:]
        if writes:
            _flash_op()
        try:
            ret = fn(*args)
        except OSError as e:
            raise _fix(e) from None
        if writes:
            _fs_changed()
        return ret

    return call


_getcwd = os.getcwd
_os_ilistdir = os.ilistdir
_os_statvfs = os.statvfs
_stat = _wrap(os.stat, True)
_ilistdir = _wrap(os.ilistdir, True)


def stat(path):
    st = _stat(path)
    if st[0] & 0x4000 and st[6]:
        st = st[:6] + (0,) + st[7:]  # a directory has no size on a board's file system
    return st


# The interpreter's own folders are not part of the board's flash.
_HIDDEN = ("dev", "proc", "tmp", "home", ".vboard")


def ilistdir(path=""):
    if _user_fs(path or "."):
        yield from _os_ilistdir(path)
        return
    base = path if path not in ("", ".") else _getcwd()
    root = base.rstrip("/") == ""
    for ent in _ilistdir(base):
        name, typ, ino = ent[0], ent[1], ent[2]
        if root and name in _HIDDEN:
            continue
        size = 0
        if not typ & 0x4000:
            try:
                size = _stat((base.rstrip("/") or "") + "/" + name)[6]
            except OSError:
                pass
        yield (name, typ, ino, size)


def listdir(path=""):
    return [e[0] for e in ilistdir(path)]


# A Pico's flash file system: 1408 KB in 4096-byte blocks (Emscripten's memory file system
# would claim 4 GB, which `mpremote df` prints run together).
_BLOCK = 4096
_BLOCKS = 352


def _blocks_used(path):
    n = 1  # the folder itself
    for ent in ilistdir(path):
        sub = path.rstrip("/") + "/" + ent[0]
        if ent[1] & 0x4000:
            n += _blocks_used(sub)
        else:
            n += (ent[3] + _BLOCK - 1) // _BLOCK
    return n


def statvfs(path):
    if _user_fs(path or "."):
        return _os_statvfs(path)
    _stat(path)  # ENOENT as on a board
    free = max(0, _BLOCKS - 1 - _blocks_used("/"))  # littlefs keeps two superblocks
    return (_BLOCK, _BLOCK, _BLOCKS, free, free, 0, 0, 0, 0, 255)


for _name in ("mkdir", "rmdir", "remove", "unlink", "rename", "chdir"):
    if hasattr(os, _name):
        setattr(
            os,
            _name,
            _wrap(getattr(os, _name), _name == "chdir", _name != "chdir"),
        )
_rmdir = os.rmdir


def rmdir(path):
    if path == "/" and not _user_fs(path):
        raise OSError(1)  # EPERM, as a board's root (Emscripten says EBUSY)
    return _rmdir(path)


os.rmdir = rmdir
os.stat = stat
os.statvfs = statvfs
os.ilistdir = ilistdir
os.listdir = listdir

_open = builtins.open


_fd_isdir = _vbhw.fd_isdir


def open(file, mode="r", *args, **kw):  # replaces the builtin on purpose
    if _user_fs(file):
        return _open(file, mode, *args, **kw)  # the mounted object's open, errors unchanged
    writing = "w" in mode or "a" in mode or "+" in mode or "x" in mode
    if writing:
        _flash_op()
    try:
        f = _open(file, mode, *args, **kw)
    except OSError as e:
        raise _fix(e) from None
    if _fd_isdir(f.fileno()):
        f.close()
        raise OSError(21)  # EISDIR: Emscripten opens a folder for reading
    return _WFile(f) if writing else f


class _WFile:
    """A file open for writing: its close is reported to the Node side (flash snapshot)."""

    def __init__(self, f):
        self._f = f
        self.write = f.write

    def close(self):
        self._f.close()
        _fs_changed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        return iter(self._f)

    def __getattr__(self, name):
        return getattr(self._f, name)


builtins.open = open


def run_file(name):
    """Run boot.py or main.py as a board does: as __main__, tracebacks printed."""
    try:
        stat(name)
    except OSError:
        return
    g = {"__name__": "__main__", "__file__": name}
    try:
        with _open(name) as f:
            code = f.read()
        exec(compile(code, name, "exec"), g)
    except SystemExit:
        pass
    except BaseException as e:  # a board prints it and goes to the REPL
        sys.print_exception(e)
