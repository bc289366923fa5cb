"""Exact money: decimal strings in, decimal strings out, never a float.

Every computation on amounts runs in EXACT, a context that raises instead of rounding, so an
amount is either exact or refused.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from decimal import Decimal

EXACT = decimal.Context(
    prec=60,
    traps=[decimal.Inexact, decimal.Rounded, decimal.InvalidOperation, decimal.Overflow],
)


class MoneyError(ValueError):
    pass


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


def fmt(amount: Decimal) -> str:
    """Plain decimal notation (no exponent), as given: "10", "2.50", "0"."""
    if amount == 0:
        return "0"
    return format(amount, "f")


def fmt_fr(amount: Decimal) -> str:
    """As the croupier says it: a decimal comma ("2,5")."""
    return fmt(amount).replace(".", ",")
