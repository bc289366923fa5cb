# Memory that survives a power cut: one small state file, replaced atomically.
#
# save() writes the whole state to state.new, then renames it over state.dat. A rename is
# atomic on LittleFS and FAT (MicroPython) as on POSIX, so a cut at any instant leaves either
# the old state.dat or the new one. A cut after the write but before the rename leaves a
# complete state.new: load() takes whichever valid file is newest (a generation number) and
# finishes the rename. Each file ends with a CRC-32 of its content: a damaged file is
# refused (CrcError), never half-read.
import binascii
import json
import os

DAT = "state.dat"
NEW = "state.new"
RESULTS_KEPT = 20


class CrcError(ValueError):
    pass


class Fs:
    """The file operations the store needs; tests replace it to cut the power mid-way."""

    def open(self, path, mode):
        return open(path, mode)

    def rename(self, old, new):
        os.rename(old, new)

    def remove(self, path):
        os.remove(path)


def encode(state):
    body = json.dumps(state)
    return "%s\n%08x\n" % (body, binascii.crc32(body.encode()) & 0xFFFFFFFF)


def decode(text):
    """The state of a file's text; CrcError when damaged or truncated."""
    cut = text.rfind("\n", 0, len(text) - 1)
    if cut < 0 or not text.endswith("\n"):
        raise CrcError("state file truncated")
    body = text[:cut]
    crc = text[cut + 1 : -1]
    if crc != "%08x" % (binascii.crc32(body.encode()) & 0xFFFFFFFF):
        raise CrcError("state file CRC mismatch")
    state = json.loads(body)
    if not isinstance(state, dict) or "gen" not in state:
        raise CrcError("state file without generation")
    return state


def defaults():
    return {
        "gen": 0,
        "boot": 0,  # boots so far, this one included once boot() ran
        "seq": 0,  # last frame seq saved
        "spin": 0,  # spins launched so far (never reused)
        "results": [],  # [spin, number] of the last RESULTS_KEPT results, newest last
        "rdir": 0,  # rotor direction of the last launch (+1 cw, -1 ccw, 0 none)
        "run": None,  # spin under way: launched, its ball not yet at rest (or stopped)
        "voided": None,  # its void reason, once sent
        "run_void": None,  # its void owed: due by its launch, unsent at a cut (rmcfw.recover)
        "run_revs": 0,  # its laps counted so far (REV frames)
        "run_lone": [0, 0],  # its ball sensors' lone edges and reversed passes so far
        "incident": None,  # spin whose incident (decree 1-4) awaits the ball back and relaunch
        "frozen": False,  # the next launch is an incident's relaunch: bets stay closed
        "session": None,  # open session: {"id", "chef", "spins", "last3", "left"}
        "sessions": 0,  # sessions opened so far
        "faults": {},  # code -> detail of the faults present
        "cfg": {},  # thresholds changed from their defaults
        "learn": None,  # the predictor's learned wheel
    }


class Store:
    def __init__(self, folder="", fs=None):
        self.fs = fs or Fs()
        pre = folder + "/" if folder and not folder.endswith("/") else folder
        self.dat = pre + DAT
        self.new = pre + NEW
        self.damaged = False  # a state file was refused at load: report a storage fault
        # called before each save: the journal's frames held in RAM are written first, so
        # that the state saved is never ahead of the journal (rmcfw.journal, hold)
        self.before_save = None

    def _read(self, path):
        try:
            f = self.fs.open(path, "r")
        except OSError:
            return None  # no such file
        try:
            return decode(f.read())
        finally:
            f.close()

    def load(self):
        """The newest valid state (defaults when none). Never raises for a bad file."""
        self.damaged = False
        best = None
        for path in (self.dat, self.new):
            try:
                s = self._read(path)
            except (CrcError, ValueError, OSError):
                # a torn state.new is what a cut during save leaves: not damage
                if path == self.dat:
                    self.damaged = True
                continue
            if s is not None and (best is None or s["gen"] > best[1]["gen"]):
                best = (path, s)
        if best is None:
            return defaults()
        path, state = best
        try:
            if path == self.new:
                self.fs.rename(self.new, self.dat)  # finish the interrupted save
            else:
                self.fs.remove(self.new)  # stale leftovers
        except OSError:
            pass
        full = defaults()
        full.update(state)
        return full

    def save(self, state):
        """Write state atomically; raises OSError when the file system fails."""
        if self.before_save is not None:
            self.before_save()
        state["gen"] = state.get("gen", 0) + 1
        text = encode(state)
        f = self.fs.open(self.new, "w")
        try:
            f.write(text)
        finally:
            f.close()
        self.fs.rename(self.new, self.dat)
