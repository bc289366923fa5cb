"""Exact money: decimal strings in, decimal strings out, never a float.

Every computation on amounts runs in EXACT, a context that raises instead of rounding, so an
amount is either exact or refused. The one rounding the rules allow, the partage on 0 given
back in the table's unit, is explicit: `round_to_unit`, with the table's stated rounding.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Iterable
from decimal import Decimal

EXACT = decimal.Context(
    prec=60,
    traps=[decimal.Inexact, decimal.Rounded, decimal.InvalidOperation, decimal.Overflow],
)


class MoneyError(ValueError):
    pass


# The canonical spelling of an amount in a bets file: ASCII digits, no leading zero, an
# optional point with digits after it. An optional minus only so that "-5" is refused as
# "not positive" rather than as a spelling. Python's own Decimal() would also take "1_0",
# "+10", " 10 ", "1e1" and "１０" — none of these decides here.
PLAIN = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.([0-9]+))?", re.ASCII)
MAX_AMOUNT_CHARS = 30  # longer than any stake or limit a table can have


def parse_plain(value: object, what: str, decimals: int) -> Decimal:
    """A positive amount spelled canonically, with at most `decimals` decimals, else MoneyError.

    A string must match PLAIN; an int is taken as is; a Decimal must be one read from a JSON
    number token that already passed the same spelling (see rmc.bets)."""
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise MoneyError(f'{what} must be a decimal string such as "10" or "2.50", not {value!r}')
    if isinstance(value, str):
        if len(value) > MAX_AMOUNT_CHARS:
            raise MoneyError(
                f"{what} is {len(value)} characters long, more than any amount ({MAX_AMOUNT_CHARS})"
            )
        if PLAIN.fullmatch(value) is None:
            raise MoneyError(
                f'{what} {value!r} is not a plain decimal such as "10" or "2.50" '
                "(ASCII digits and one point; no sign, space, exponent or separator)"
            )
        amount = Decimal(value)
    elif isinstance(value, int):
        if value.bit_length() > 100:  # ~30 digits
            raise MoneyError(f"{what} has more digits than any amount ({MAX_AMOUNT_CHARS})")
        amount = Decimal(value)
    else:
        amount = value
    if not amount.is_finite():
        raise MoneyError(f"{what} {value!r} is not a finite amount")
    places = -amount.as_tuple().exponent  # type: ignore[operator]
    if places < 0:  # Decimal("1E+1") handed over by a caller: no plain spelling has that
        raise MoneyError(f"{what} {amount} is not a plain decimal (it has an exponent)")
    if places > decimals:
        raise MoneyError(
            f"{what} {amount} has {places} decimals, more than the currency's {decimals}"
        )
    if amount <= 0:
        raise MoneyError(f"{what} {value!r} is not positive")
    return amount


def parse_amount(value: object, what: str = "amount") -> Decimal:
    """A positive finite decimal from a string (or an exact JSON number), else MoneyError."""
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise MoneyError(f'{what} must be a decimal string such as "10" or "2.50", not {value!r}')
    try:
        amount = Decimal(value.strip()) if isinstance(value, str) else Decimal(value)
    except decimal.InvalidOperation:
        raise MoneyError(f"{what} {value!r} is not a decimal number") from None
    if not amount.is_finite():
        raise MoneyError(f"{what} {value!r} is not a finite amount")
    if amount <= 0:
        raise MoneyError(f"{what} {value!r} is not positive")
    return amount


def total(amounts: Iterable[Decimal]) -> Decimal:
    """The exact sum of amounts (raises rather than round, however many there are)."""
    with decimal.localcontext(EXACT):
        return sum(amounts, Decimal(0))


def is_multiple(amount: Decimal, unit: Decimal) -> bool:
    try:
        return EXACT.remainder(amount, unit) == 0
    except decimal.DecimalException:
        return False


# Roundings a table may state for the partage (decimal's names, as the table file spells them).
ROUNDINGS = {
    "down": decimal.ROUND_DOWN,
    "up": decimal.ROUND_UP,
    "half-even": decimal.ROUND_HALF_EVEN,
    "half-up": decimal.ROUND_HALF_UP,
}


def round_to_unit(amount: Decimal, unit: Decimal, rounding: str) -> Decimal:
    """A positive amount rounded to a whole multiple of `unit` (which need not be a power of
    ten, e.g. 5), exactly. An amount already on the unit comes back unchanged, spelling
    included ("3.5" stays "3.5"). Raises MoneyError for an unknown rounding."""
    if rounding not in ROUNDINGS:
        raise MoneyError(f"unknown rounding {rounding!r} (one of {', '.join(ROUNDINGS)})")
    whole = EXACT.divide_int(amount, unit)
    rest = EXACT.subtract(amount, EXACT.multiply(whole, unit))
    if rest == 0:
        return amount
    twice = EXACT.multiply(rest, Decimal(2))
    step = {
        "down": False,
        "up": True,
        "half-up": twice >= unit,
        "half-even": twice > unit or (twice == unit and whole % 2 == 1),
    }[rounding]
    return EXACT.multiply(EXACT.add(whole, Decimal(1)) if step else whole, unit)


def fmt(amount: Decimal) -> str:
    """Plain decimal notation (no exponent), as given: "10", "2.50", "0"."""
    if amount == 0:
        return "0"
    return format(amount, "f")


def fmt_fr(amount: Decimal) -> str:
    """As the croupier says it: a decimal comma ("2,5")."""
    return fmt(amount).replace(".", ",")
