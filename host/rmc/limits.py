"""Table limits (decree 1-3): minimum and maximum stake per combination, colour-chip markers.

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
from rmc.money import MoneyError, parse_amount


class TableError(ValueError):
    """A table file that cannot be used."""


@dataclass(frozen=True, slots=True)
class Limit:
    min: Decimal
    max: Decimal


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    currency: str
    unit: Decimal  # every stake is a whole multiple of it
    marker: Limit  # bounds of a colour chip's value
    limits: dict[str, Limit]  # per bet type

    @classmethod
    def load(cls, path: str | Path | None = None) -> Table:
        if path is None:
            text = resources.files("rmc").joinpath("data/table.toml").read_text("utf-8")
            source = "default table"
        else:
            try:
                text = Path(path).read_text("utf-8")
            except OSError as e:
                raise TableError(f"cannot read table file {path}: {e.strerror}") from None
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
        unit = parse_amount(head.get("unit", "0.01"), "[table] unit")
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
        )


def _limit(entry: object, where: str) -> Limit:
    if not isinstance(entry, dict) or "min" not in entry or "max" not in entry:
        raise TableError(f"{where} needs min and max")
    low = parse_amount(entry["min"], f"{where} min")
    high = parse_amount(entry["max"], f"{where} max")
    if low > high:
        raise TableError(f"{where}: min {low} is above max {high}")
    return Limit(low, high)
