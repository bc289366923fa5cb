"""The virtual Pico: MicroPython's own RP2040 build on an emulated RP2040 (rp2040js).

`VirtualPico` starts `node host/node/vpico.mjs` on a LittleFS image of the board's flash file
system and speaks the virtual board's control protocol (JSON lines): the REPL is at
`repl_url` (the real mpremote: `mpremote connect socket://127.0.0.1:PORT ...`), the frame UART
at `uart_url`. The firmware and the boot ROM are read from `../shared/rp2/` (`RMC_RP2_DIR`),
never copied into the project.

    image = build_image(tmp / "flash.img", firmware_files(tmp / "fw"))
    with VirtualPico(image=image) as vp:
        vp.feed("trace.jsonl")        # sensor edges, times from now on the chip's own clock
        vp.mpremote("exec", "print(1+1)")

The image file is the flash: every erase or program the chip makes in the file system's
region is written to it at once, so a power cut is the emulator stopped (`power_cut()`, or the
process killed) and started again on the same file. See docs/vpico.md.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rmc import ROOT
from rmc.vboard import VirtualBoard, VirtualBoardError

VPICO_JS = ROOT / "host" / "node" / "vpico.mjs"
RP2_DIR = Path(os.environ.get("RMC_RP2_DIR", ROOT.parent / "shared" / "rp2"))
FIRMWARE_BIN = "micropython-v1.28.0-rpi-pico.bin"
BOOTROM_BIN = "rp2040-bootrom-b1.bin"
RP2040JS = ROOT / "host" / "node" / "node_modules" / "rp2040js" / "package.json"

# The rp2 port's file system (ports/rp2/modules/_boot.py, RPI_PICO): LittleFS v2 on the last
# 1408 KB of the 2 MB flash, from offset 0xa0000.
FS_OFFSET = 0xA0000
BLOCK_SIZE = 4096
BLOCK_COUNT = 352
PROG_SIZE = 256


class VirtualPicoError(VirtualBoardError):
    """The virtual Pico could not start, or a file it needs is missing."""


def missing() -> str | None:
    """Why the virtual Pico cannot run here (node, rp2040js, the shared rp2 files), or None."""
    if shutil.which("node") is None:
        return "node not found (make setup installs it)"
    if not RP2040JS.is_file():
        return f"rp2040js not installed ({RP2040JS.parent}): run make setup"
    for name in (FIRMWARE_BIN, BOOTROM_BIN):
        if not (RP2_DIR / name).is_file():
            return f"{RP2_DIR / name} missing (the shared MicroPython RP2040 build)"
    try:
        import littlefs  # noqa: F401
    except ImportError:
        return "littlefs-python not installed (pip install littlefs-python)"
    return None


def firmware_files(out: Path) -> Path:
    """The firmware as `make deploy` puts it (mpy-cross, main.py, pins.json, wheel.json)."""
    from rmc.demo.deploy import build

    return build(out)


def build_image(
    path: Path, folder: Path | None = None, extra: dict[str, bytes] | None = None
) -> Path:
    """Write a LittleFS image of `folder`'s files (and `extra`: name -> bytes) to `path`.

    Block 4096, 352 blocks, as the rp2 port mounts it; the file is exactly the region, so
    the emulator maps it at FS_OFFSET and writes the chip's erases and programs back into it.
    """
    try:
        import littlefs
    except ImportError:
        raise VirtualPicoError(
            "littlefs-python not installed (pip install littlefs-python)"
        ) from None
    fs = littlefs.LittleFS(block_size=BLOCK_SIZE, block_count=BLOCK_COUNT, prog_size=PROG_SIZE)
    if folder is not None:
        for p in sorted(Path(folder).rglob("*")):
            rel = p.relative_to(folder).as_posix()
            if p.is_dir():
                fs.mkdir(rel)
            else:
                with fs.open(rel, "wb") as f:
                    f.write(p.read_bytes())
    for name, data in (extra or {}).items():
        with fs.open(name, "wb") as f:
            f.write(data)
    path = Path(path)
    path.write_bytes(bytes(fs.context.buffer))
    return path


def read_image(path: Path) -> dict[str, bytes]:
    """Every file of a LittleFS image, by path ("rmcfw/table.mpy"): what the chip left there."""
    import littlefs

    data = Path(path).read_bytes()
    fs = littlefs.LittleFS(block_size=BLOCK_SIZE, block_count=BLOCK_COUNT, mount=False)
    fs.context.buffer[:] = data
    fs.mount()
    files: dict[str, bytes] = {}
    for root, _dirs, names in fs.walk("/"):
        for n in names:
            p = (root.rstrip("/") + "/" + n).lstrip("/")
            with fs.open(p, "rb") as f:
                files[p] = f.read()
    return files


@dataclass
class VirtualPico(VirtualBoard):
    """A running virtual Pico (a node process running rp2040js); VirtualBoard's interface.

    `image` is the LittleFS image file (build_image); `flash_timing` False makes flash
    erases and programs take no emulated time.
    """

    image: Path | str | None = None
    rp2_dir: Path | str | None = None
    flash_timing: bool = True
    start_timeout: float = 30.0

    def command(self) -> list[str]:
        why = missing()
        if why:
            raise VirtualPicoError(why)
        if self.image is None or not Path(self.image).is_file():
            raise VirtualPicoError(f"no flash image {self.image} (rmc.vpico.build_image)")
        cmd = [self.node, str(VPICO_JS), "--control", "--image", str(self.image)]
        cmd += ["--repl-port", str(self.repl_port), "--uart-port", str(self.uart_port)]
        cmd += ["--rp2-dir", str(self.rp2_dir or RP2_DIR)]
        if self.sensors is not None:
            cmd += ["--sensors", str(self.sensors)]
        if self.pins is not None:
            cmd += ["--pins", str(self.pins)]
        if not self.flash_timing:
            cmd += ["--flash-timing", "0"]
        return cmd

    def wait_clock(self, t_us: float, timeout: float = 300.0) -> bool:
        """Wait until the chip's clock (world time, µs) has reached t_us; False on timeout.

        The chip's REPL listens once MicroPython is up, about 0.5 s of its time after a
        power-up: bytes sent before may reach a program that is not reading them."""
        deadline = time.monotonic() + timeout
        while self.status()["t_us"] < t_us:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def files(self) -> dict[str, bytes]:
        """The files on the chip's flash now (the image as written so far)."""
        return read_image(Path(self.image))
