# The power-safe state: atomic replace, CRC checks, and a power cut at every file operation.
from fwtest import raises, scratch_dir

from rmcfw import store


class PowerCut(Exception):
    pass


class CutFs(store.Fs):
    """File operations that stop dead after `budget` steps; a write may land half-way."""

    def __init__(self, budget):
        self.budget = budget

    def _step(self):
        if self.budget <= 0:
            raise PowerCut()
        self.budget -= 1

    def open(self, path, mode):
        self._step()
        return _CutFile(self, open(path, mode))

    def rename(self, old, new):
        self._step()
        store.Fs.rename(self, old, new)

    def remove(self, path):
        self._step()
        store.Fs.remove(self, path)


class _CutFile:
    def __init__(self, fs, f):
        self.fs = fs
        self.f = f

    def write(self, data):
        # the cut can fall in the middle of the data: half of it reaches the flash
        if self.fs.budget <= 0:
            self.f.write(data[: len(data) // 2])
            self.f.close()
            raise PowerCut()
        self.fs.budget -= 1
        return self.f.write(data)

    def read(self):
        return self.f.read()

    def close(self):
        self.f.close()


def test_roundtrip_and_generations():
    d = scratch_dir()
    s = store.Store(d)
    st = s.load()
    assert st == store.defaults()
    st["boot"] = 3
    st["results"].append([1, "17"])
    s.save(st)
    s.save(st)
    got = store.Store(d).load()
    assert got["boot"] == 3 and got["results"] == [[1, "17"]] and got["gen"] == 2


def test_bad_crc_raises():
    text = store.encode({"gen": 1, "boot": 2})
    assert store.decode(text)["boot"] == 2
    bad = text.replace('"boot": 2', '"boot": 3')
    raises(store.CrcError, store.decode, bad)
    raises(store.CrcError, store.decode, text[:-3])
    raises(store.CrcError, store.decode, "")


def test_damaged_state_file_is_reported_not_read():
    d = scratch_dir()
    s = store.Store(d)
    st = s.load()
    st["boot"] = 5
    s.save(st)
    with open(d + "/" + store.DAT, "r") as f:
        text = f.read()
    with open(d + "/" + store.DAT, "w") as f:
        f.write(text.replace('"boot": 5', '"boot": 6'))
    s2 = store.Store(d)
    got = s2.load()
    assert s2.damaged and got["boot"] == 0  # never half-trusted


def test_power_cut_at_every_step_leaves_old_or_new():
    old = store.defaults()
    old["boot"] = 1
    old["results"] = [[1, "0"]]
    new = store.defaults()
    new["boot"] = 1
    new["results"] = [[1, "0"], [2, "CMC"]]
    new["faults"] = {"rotor_sensor": "stopped"}
    budget = 0
    completed = False
    while not completed:
        d = scratch_dir("cut")
        store.Store(d).save(dict(old))
        s = store.Store(d, CutFs(budget))
        try:
            s.save(dict(new))
            completed = True
        except PowerCut:
            pass
        back = store.Store(d)
        got = back.load()
        assert not back.damaged, budget
        assert got["results"] in (old["results"], new["results"]), (budget, got)
        if got["results"] == new["results"]:
            assert got["faults"] == new["faults"]
        else:
            assert got["faults"] == {}
        # and once recovered, the next load still agrees (the interrupted rename was finished)
        again = store.Store(d).load()
        assert again["results"] == got["results"] and again["gen"] == got["gen"]
        budget += 1
    assert budget >= 3  # open, write, rename were each cut once
