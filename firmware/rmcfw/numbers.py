# The 39 numbers of the Roulette Monte-Carlo (decree 2019-819, 1-2) and their simple chances.
#
# One source of truth for both halves: the firmware uses it to describe a result in its frames,
# the host to build the tapis (layout) and to settle bets. Numbers are named by their labels
# ("0", "00", "CMC", "1" ... "36"); INDEX gives each a small integer used in tables.
from micropython import const

ZERO = "0"
DOUBLE_ZERO = "00"
CMC = "CMC"

# Canonical order: the green row of the tapis first (0 above 1, 00 above 2, CMC above 3), then 1-36.
NUMBERS = (ZERO, DOUBLE_ZERO, CMC) + tuple(str(n) for n in range(1, 37))
COUNT = const(39)
INDEX = {label: i for i, label in enumerate(NUMBERS)}

# Red numbers of the tapis; the other numbers of 1-36 are black; 0, 00 and CMC are neither.
RED = (1, 3, 5, 7, 9, 12, 14, 16, 18, 19, 21, 23, 25, 27, 30, 32, 34, 36)

# The tapis as a grid of rows of three, top to bottom: the green row, then 1-2-3 ... 34-35-36.
GRID = ((ZERO, DOUBLE_ZERO, CMC),) + tuple(
    tuple(str(3 * row + col + 1) for col in range(3)) for row in range(12)
)

ROUGE = "rouge"
NOIR = "noir"
VERT = "vert"
PAIR = "pair"
IMPAIR = "impair"
MANQUE = "manque"
PASSE = "passe"


def is_green(label):
    return label in (ZERO, DOUBLE_ZERO, CMC)


def value(label):
    """The number 1-36 of a label, or None for the three green pockets."""
    if is_green(label):
        return None
    if label not in INDEX:
        raise ValueError("not a number of the wheel: %r" % (label,))
    return int(label)


def colour(label):
    n = value(label)
    if n is None:
        return VERT
    return ROUGE if n in RED else NOIR


def chances(label):
    """(colour, parity, half) of 1-36, e.g. ("noir", "impair", "manque"); None for green."""
    n = value(label)
    if n is None:
        return None
    return (
        ROUGE if n in RED else NOIR,
        PAIR if n % 2 == 0 else IMPAIR,
        MANQUE if n <= 18 else PASSE,
    )
