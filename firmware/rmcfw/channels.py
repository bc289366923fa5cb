# Sensor channels, as numbered in the firmware core and named in trace files.
#
# Pocket channels 0..38 are sensor positions around the wheel: pocket channel i sits under
# hardware/wheel.json "pockets"[i]. A pocket channel reads 1 while the ball is in that pocket.
# Ball sensors pulse 1 as the ball passes; the rotor's two quadrature sensors give direction.
from micropython import const

POCKETS = const(39)
ROTOR_A = const(39)
ROTOR_B = const(40)
BALL_A = const(41)
BALL_B = const(42)
LID = const(43)  # 1 = lid locked on the cylinder
INCIDENT = const(44)  # 1 = croupier's incident input active
COUNT = const(45)

_NAMES = ("rotor_a", "rotor_b", "ball_a", "ball_b", "lid", "incident")


def name(ch):
    """Trace name of a channel: "pocket:12", "ball_a", ..."""
    if 0 <= ch < POCKETS:
        return "pocket:%d" % ch
    if POCKETS <= ch < COUNT:
        return _NAMES[ch - POCKETS]
    raise ValueError("no channel %r" % (ch,))


def parse(text):
    """Channel number of a trace name; ValueError for anything else."""
    if text.startswith("pocket:"):
        n = text[7:]
        # one spelling: ASCII digits, no sign, no space, no leading zero
        if n and (n == "0" or n[0] != "0") and all("0" <= c <= "9" for c in n):
            ch = int(n)
            if ch < POCKETS:
                return ch
    elif text in _NAMES:
        return POCKETS + _NAMES.index(text)
    raise ValueError("no channel %r" % (text,))
