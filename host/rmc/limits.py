"""Table limits (decree 1-3): minimum and maximum stake per combination, colour-chip markers,
and the money rules of the table: its unit, its currency's decimals, and how the partage on 0
(decree 1-5) is rounded to the unit.

Read from a TOML table file (`rmc settle --table FILE.toml`); the documented default is
`rmc/data/table.toml`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path

from rmc.layout import TYPES
from rmc.money import EXACT, ROUNDINGS, MoneyError, parse_amount, round_to_unit

_TABLE_MAX = 1 << 20  # bytes: a table file is a few hundred

_TWO = Decimal(2)
MAX_DECIMALS = 8
_SETTINGS = {"name", "currency", "unit", "decimals", "partage_rounding"}


class TableError(ValueError):
    """A table file that cannot be used."""


@dataclass(frozen=True, slots=True)
class Limit:
    min: Decimal
    max: Decimal


@dataclass(frozen=True, slots=True)
class Partage:
    """How the table gives back half a chance simple's stake when 0 comes out (decree 1-5).

    The table pays in its unit, so the exact half is rounded to it, as the table file states
    (`[table] partage_rounding`, default "down": the table keeps the fraction)."""

    unit: Decimal
    rounding: str = "down"

    def give_back(self, stake: Decimal) -> Decimal:
        return round_to_unit(EXACT.divide(stake, _TWO), self.unit, self.rounding)


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    currency: str
    unit: Decimal  # every stake is a whole multiple of it; the partage is paid in it
    marker: Limit  # bounds of a colour chip's value
    limits: dict[str, Limit]  # per bet type
    decimals: int = 2  # the currency's decimals: a bets file may not spell more
    partage_rounding: str = "down"  # one of money.ROUNDINGS

    @property
    def partage(self) -> Partage:
        return Partage(self.unit, self.partage_rounding)

    @classmethod
    def load(cls, path: str | Path | None = None) -> Table:
        if path is None:
            text = resources.files("rmc").joinpath("data/table.toml").read_text("utf-8")
            source = "default table"
        else:
            try:
                with open(path, "rb") as f:
                    data = f.read(_TABLE_MAX + 1)  # (bounded: a device may never end)
                text = data.decode("utf-8")
            except OSError as e:
                raise TableError(f"cannot read table file {path}: {e.strerror or e}") from None
            except UnicodeDecodeError:
                raise TableError(f"table file {path} is not UTF-8 text") from None
            if len(data) > _TABLE_MAX:
                raise TableError(f"table file {path} is over {_TABLE_MAX >> 10} KiB: not a table")
            source = str(path)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise TableError(f"{source}: not valid TOML: {e}") from None
        try:
            return cls._from_dict(data)
        except (TableError, KeyError, TypeError, MoneyError) as e:
            raise TableError(f"{source}: {e}") from None

    @classmethod
    def _from_dict(cls, data: dict) -> Table:
        head = data.get("table", {})
        if not isinstance(head, dict):
            raise TableError("[table] must be a section")
        unknown = sorted(set(head) - _SETTINGS)
        if unknown:
            # A misspelt setting would otherwise fall back to its default in silence.
            raise TableError(f"[table] has unknown setting(s): {', '.join(unknown)}")
        decimals = head.get("decimals", 2)
        if isinstance(decimals, bool) or not isinstance(decimals, int):
            raise TableError(f"[table] decimals must be a whole number 0-{MAX_DECIMALS}")
        if not 0 <= decimals <= MAX_DECIMALS:
            raise TableError(f"[table] decimals {decimals} is not in 0-{MAX_DECIMALS}")
        unit = parse_amount(head.get("unit", "0.01"), "[table] unit")
        if -unit.normalize().as_tuple().exponent > decimals:  # type: ignore[operator]
            raise TableError(
                f"[table] unit {unit} is finer than the currency's {decimals} decimals"
            )
        rounding = head.get("partage_rounding", "down")
        if not isinstance(rounding, str) or rounding not in ROUNDINGS:
            raise TableError(
                f"[table] partage_rounding {rounding!r} is not one of {', '.join(ROUNDINGS)}"
            )
        marker = _limit(data.get("marker", {"min": "1", "max": "1000000"}), "[marker]")
        raw = data.get("limits")
        if not isinstance(raw, dict):
            raise TableError("no [limits] section")
        unknown = sorted(set(raw) - set(TYPES))
        if unknown:
            raise TableError(f"[limits] names unknown bet types: {', '.join(unknown)}")
        missing = [t for t in TYPES if t not in raw]
        if missing:
            raise TableError(f"[limits] has no entry for: {', '.join(missing)}")
        limits = {t: _limit(raw[t], f"[limits.{t}]") for t in TYPES}
        return cls(
            name=str(head.get("name", "table")),
            currency=str(head.get("currency", "")),
            unit=unit,
            marker=marker,
            limits=limits,
            decimals=decimals,
            partage_rounding=rounding,
        )


def _limit(entry: object, where: str) -> Limit:
    if not isinstance(entry, dict) or "min" not in entry or "max" not in entry:
        raise TableError(f"{where} needs min and max")
    low = parse_amount(entry["min"], f"{where} min")
    high = parse_amount(entry["max"], f"{where} max")
    if low > high:
        raise TableError(f"{where}: min {low} is above max {high}")
    return Limit(low, high)
