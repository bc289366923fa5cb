# The virtual board's stand-in for ramdisk.py of MicroPython's mpremote tests (this port has no
# os.VfsFat): a file system object mounted at mount_path whose files live in a folder of the
# board's own (WebAssembly) file system, in RAM like the FAT RAM disk, and empty when mounted.
import os


class FolderFS:
    def __init__(self, root):
        self.root = root
        self.cwd = "/"

    def _p(self, path):
        if not path.startswith("/"):
            path = self.cwd + path
        parts = []
        for part in path.split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return self.root + "".join("/" + p for p in parts)

    def mount(self, readonly, mkfs):
        pass

    def umount(self):
        pass

    def open(self, path, mode):
        return open(self._p(path), mode)

    def ilistdir(self, path):
        return os.ilistdir(self._p(path))

    def stat(self, path):
        return os.stat(self._p(path))

    def statvfs(self, path):
        return (block_size, block_size, num_blocks, num_blocks, num_blocks, 0, 0, 0, 0, 255)

    def remove(self, path):
        os.remove(self._p(path))

    def rename(self, old, new):
        os.rename(self._p(old), self._p(new))

    def mkdir(self, path):
        os.mkdir(self._p(path))

    def rmdir(self, path):
        full = self._p(path)
        if full == self.root:
            raise OSError(22)  # EINVAL, as FAT says of its root (mpremote: "vfs mountpoint")
        os.rmdir(full)

    def chdir(self, path):
        full = self._p(path)
        if not os.stat(full)[0] & 0x4000:
            raise OSError(20)  # ENOTDIR
        self.cwd = full[len(self.root) :] + "/"

    def getcwd(self):
        return self.cwd.rstrip("/") or "/"


def _empty(p):
    for e in os.ilistdir(p):
        q = p + "/" + e[0]
        if e[1] & 0x4000:
            _empty(q)
            os.rmdir(q)
        else:
            os.remove(q)


try:
    block_size  # noqa: B018  set by an earlier exec, as ramdisk.py allows
except NameError:
    block_size = 512
try:
    num_blocks  # noqa: B018  set by an earlier exec, as ramdisk.py allows
except NameError:
    num_blocks = 50
try:
    mount_path  # noqa: B018  set by an earlier exec, as ramdisk.py allows
except NameError:
    mount_path = "/ramdisk"
try:
    do_chdir  # noqa: B018  set by an earlier exec, as ramdisk.py allows
except NameError:
    do_chdir = True

_root = "/tmp/ramdisk" + mount_path.replace("/", "_")
try:
    os.mkdir(_root)
except OSError:
    _empty(_root)
os.mount(FolderFS(_root), mount_path)
if do_chdir:
    os.chdir(mount_path)
