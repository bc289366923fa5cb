# The predictor's calls, bit for bit: a fixed set of spins replayed through the predictor in
# each of its settings, every value it gives after every pass (deadline, why, drop_s,
# revs_left) and what it learns at each spin's end hashed into one number. The numbers were
# recorded with the predictor as one module (before its split by concern, 7a0147c^): a
# rewrite that changes no call keeps them. CPython and MicroPython's WebAssembly port each
# have their own (their libm may differ in the last bit); a port with single floats is
# not held to them.
import struct
import sys

import lapgen

from rmcfw import rnvp, ticks

# sys.implementation.name -> the digest recorded
DIGESTS = {"cpython": (187937298, 5501), "micropython": (187937298, 5501)}


class Digest:
    """FNV-1a over the bytes of the values fed (floats as IEEE doubles)."""

    def __init__(self):
        self.h = 0x811C9DC5
        self.count = 0

    def bytes(self, data):
        h = self.h
        for x in data:
            h = ((h ^ x) * 0x01000193) & 0xFFFFFFFF
        self.h = h
        self.count += 1

    def value(self, x):
        if x is None:
            self.bytes(b"N")
        elif isinstance(x, bool):
            self.bytes(b"T" if x else b"F")
        elif isinstance(x, int):
            self.bytes(b"I" + str(x).encode())
        elif isinstance(x, float):
            self.bytes(b"D" + struct.pack("<d", x))
        elif isinstance(x, str):
            self.bytes(b"S" + x.encode())
        elif isinstance(x, (list, tuple)):
            self.bytes(("L%d" % len(x)).encode())
            for y in x:
                self.value(y)
        elif isinstance(x, dict):
            for k in sorted(x):
                self.value(k)
                self.value(x[k])
        else:
            raise TypeError(x)


def _replay(d, p, times):
    us = [int(x * 1e6) for x in times]
    p.reset(us[0])
    d.value([p.deadline, p.why, p.drop_s, p.revs_left])
    for t in us[1:]:
        p.lap(t)
        d.value([ticks.diff(p.deadline, us[0]), p.why, p.drop_s, p.revs_left])
    d.value(p.learn_drop())
    d.value(rnvp.export(p))


def digest():
    """(the digest, the values hashed) of the fixed replay."""
    d = Digest()
    # a call to the last pass, learning as it goes, pass noise
    p = rnvp.Predictor(lead_s=1.0)
    for t in lapgen.spins(5, 1.1, 10, noise_s=0.01):
        _replay(d, p, t)
    # the same with the wheel's prior, on laps clocked one by one (the lap-noise fits)
    p = rnvp.Predictor(lead_s=1.0, drop_s=1.07 * 0.9)
    for t in lapgen.spins(6, 0.9, 10, noise_s=0.0, lap_noise_s=0.02):
        _replay(d, p, t)
    # a lead in revolutions, on a slow wheel
    p = rnvp.Predictor(lead_revs=2)
    for t in lapgen.spins(7, 1.6, 6, noise_s=0.01):
        _replay(d, p, t)
    # the table's: a call to the drop, in seconds then in revolutions
    p = rnvp.Predictor(to_drop=True)
    for t in lapgen.spins(8, 1.2, 8, noise_s=0.0):
        _replay(d, p, t)
    p.lead_revs = 2
    for t in lapgen.spins(9, 1.2, 4, noise_s=0.0):
        _replay(d, p, t)
    # two wheels in turn: the change test, a wheel forgotten
    p = rnvp.Predictor(lead_s=2.0)
    fast = lapgen.spins(10, 0.7, 6, noise_s=0.01)
    slow = lapgen.spins(11, 1.8, 6, noise_s=0.01)
    for i in range(6):
        _replay(d, p, fast[i])
        _replay(d, p, slow[i])
    # what was learned, restored into another predictor, calls the same
    q = rnvp.Predictor(lead_s=2.0)
    d.value(rnvp.restore(q, rnvp.export(p)))
    _replay(d, q, slow[0])
    # odd spins: too short, not slowing, garbled
    for laps in ((0.6, 0.6, 0.6), (0.6, 0.6, 0.6, 0.6, 0.6), (0.6, 0.9, 0.6, 1.5, 0.5, 2.0)):
        times = [0.0]
        for lap in laps:
            times.append(times[-1] + lap)
        _replay(d, q, times)
    return d.h, d.count


def _double():
    return 1.0 + 1e-12 != 1.0


def test_the_calls_are_as_recorded():
    h, n = digest()
    want = DIGESTS.get(sys.implementation.name)
    if want is None or not _double():
        return  # nothing recorded for this interpreter, or single floats
    assert (h, n) == want, ((h, n), want)


if __name__ == "__main__":
    print("@@DIGEST", sys.implementation.name, digest())
