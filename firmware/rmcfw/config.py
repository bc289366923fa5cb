# Thresholds of the table, with their defaults and allowed ranges. The host changes them with
# SET key=... value=...; they are kept in the power-safe state.
#
# Every time is measured on the wrapped tick clock (rmcfw.ticks), which tells intervals only
# up to its half period (~537 s): no threshold may reach it, or its timer would never fire.
# A value from the wire has one spelling (number()): "+5", "05" or " 5" set nothing.
from math import pi, sqrt, tan

from rmcfw import frames

_KEYS = {
    # key: (default, min, max)
    "settle_ms": (1500, 200, 10000),  # one pocket held that long: the ball is at rest
    "object_ms": (300, 20, 5000),  # two pockets held that long: an object in the cylinder
    "no_pocket_ms": (10000, 2000, 60000),  # no pocket after the drop: the ball left the wheel
    # pockets saw the ball bounce, then none holds it that long: a dead pocket sensor
    "dead_pocket_ms": (3000, 500, 60000),
    # a pocket held that long while bets are open (the ball is off the pockets): stuck on
    "stuck_on_ms": (1500, 200, 60000),
    "drop_pct": (160, 120, 400),  # no pass for this % of the last lap: the ball has dropped
    "pocket_drop_ms": (30, 1, 1000),  # a new pocket held that long during the run: dropped
    "lead_ms": (5000, 0, 10000),  # "rien ne va plus" that long before the predicted drop
    "lead_revs": (0, 0, 10),  # ... or that many revolutions (when not 0)
    # each spin, a random extra lead drawn uniformly in 0..lead_window_ms on top of the
    # lead: the call comes earlier, never later (rmcfw.lead). 0: none
    "lead_window_ms": (0, 0, 10000),
    "limit_ms": (1400, 500, 5000),  # a lap longer than this: call it anyway
    # the ball's period when the rim lets it go, the predictor's prior for this wheel: by
    # default from the wheel definition's geometry (drop_ms_of); 0: learn it from scratch
    "drop_ms": (0, 0, 5000),
    # fewer ball revolutions: no spin. Never below the 4 of the rules (DESIGN.md): stricter only
    "min_revs": (4, 4, 20),
    "lone_max": (1, 0, 100),  # ball edges without partner tolerated per spin
    "stuck_off": (300, 39, 5000),  # results without a pocket ever seen on: stuck off
    "pair_ms": (120, 5, 1000),  # gap within which the two ball sensors see one pass
    "rotor_stop_ms": (2000, 200, 20000),  # no rotor edge that long: the rotor stands still
    "status_ms": (0, 0, 60000),  # a STAT frame every status_ms (0: on changes only)
    # incident: the ball not seen back in the previous result's pocket, no pocket held and
    # no pass that long (that pocket's sensor dead?): the relaunch is allowed, with a fault.
    # At most 500 s: the tick clock's half period (above)
    "incident_ms": (30000, 5000, 500000),
}


def drop_ms_of(wheel):
    """The ball's period at the drop (ms) that a wheel definition (wheel.json as a dict)
    gives: the rim lets the ball go when R*W^2 < g*tan(drop_angle_deg), so T = 2*pi /
    sqrt(g*tan(angle)/R). 0 when the definition has no such geometry (or not a sane one)."""
    try:
        geo = wheel["geometry"]
        angle = float(geo["drop_angle_deg"])
        radius = float(geo["ball_track_radius_m"])
    except (KeyError, TypeError, ValueError):
        return 0
    if not (0 < angle < 89 and 0 < radius < 5):
        return 0
    ms = int(2000 * pi / sqrt(9.81 * tan(angle * pi / 180) / radius) + 0.5)
    _, lo, hi = _KEYS["drop_ms"]
    return ms if lo <= ms <= hi else 0


class Config:
    def __init__(self, saved=None, defaults=None):
        """saved: the settings changed by SET; defaults: this table's own defaults (e.g.
        drop_ms from its wheel), in place of the built-in ones."""
        self._defaults = {}
        # keys set by hand (SET, or saved from one), even to their default's value: they
        # are kept, and a limit set so is not raised for a slow wheel (rnvp)
        self._hand = set()
        for k, v in _KEYS.items():
            setattr(self, k, v[0])
            self._defaults[k] = v[0]
        if defaults:
            for k, v in defaults.items():
                self._put(k, v)
                self._defaults[k] = getattr(self, k)
        self.load(saved)

    def load(self, saved):
        """Set by hand the settings of a saved dict (the state's, or what its journal adds);
        a key of another firmware version, or a value out of today's range, keeps its
        current value."""
        if saved:
            for k, v in saved.items():
                try:
                    self.set(k, v)
                except ValueError:
                    pass

    def set(self, key, value):
        """Set a threshold by hand from its text or int value; ValueError as check()."""
        self._put(key, value)
        self._hand.add(key)

    def _put(self, key, value):
        setattr(self, key, check(key, value))

    def by_hand(self, key):
        """Whether the key was set by hand (SET), whatever its value."""
        return key in self._hand

    def changed(self):
        """The settings set by hand or differing from their defaults (what is worth
        saving)."""
        out = {}
        for k in _KEYS:
            cur = getattr(self, k)
            if k in self._hand or cur != self._defaults[k]:
                out[k] = cur
        return out


def check(key, value):
    """The int a threshold would be set to; ValueError when the key is unknown, the value
    not in its one spelling (number()) or out of range."""
    if key not in _KEYS:
        raise ValueError("no setting %r" % (key,))
    v = number(value)
    _, lo, hi = _KEYS[key]
    if not lo <= v <= hi:
        raise ValueError("%s must be in %d..%d" % (key, lo, hi))
    return v


def number(value):
    """The int a value stands for: an int as it is, or text (str or bytes) in the protocol's
    one spelling of a number, ASCII digits with no sign and no leading zero, at most 10 of
    them. ValueError for anything else, which int() would often read: "+5", "05", " 5",
    "5_0", other scripts' digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, (str, bytes)):
        raise ValueError("not a number")
    return frames.number(value)  # the wire's own reading (FrameError is a ValueError)


def keys():
    return tuple(_KEYS)


def bounds(key):
    """(min, max) allowed for a key; KeyError when there is no such key."""
    _, lo, hi = _KEYS[key]
    return lo, hi
