"""The pockets in the wheel's order, as the statistics index them.

Every statistic here works on counts indexed by position on the wheel (the order of
`pockets` in hardware/wheel.json, read through `rmc.sim.wheel.load_wheel`), so that a sector
is a run of neighbouring indices, modulo 39.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from rmcfw import numbers


@dataclass(frozen=True)
class WheelOrder:
    """The 39 labels in wheel order and the index of each."""

    pockets: tuple[str, ...]
    name: str = "default-39"

    def __post_init__(self) -> None:
        if sorted(self.pockets) != sorted(numbers.NUMBERS):
            raise ValueError("a wheel's pockets must hold each of the 39 numbers once")

    @property
    def size(self) -> int:
        return len(self.pockets)

    def index(self, label: str) -> int:
        return self._index[label]

    @cached_property
    def _index(self) -> dict[str, int]:
        return {p: i for i, p in enumerate(self.pockets)}

    def indices(self, labels: Iterable[str]) -> np.ndarray:
        """Wheel positions of labels (int16); ValueError names a label that is no pocket."""
        idx = self._index
        try:
            return np.fromiter((idx[x] for x in labels), dtype=np.int16)
        except KeyError as e:
            raise ValueError(f"{e.args[0]!r} is not a pocket of the wheel") from None

    def counts(self, idx: np.ndarray) -> np.ndarray:
        return np.bincount(np.asarray(idx, dtype=np.int64), minlength=self.size)

    def sector(self, start: int, width: int) -> list[str]:
        return [self.pockets[(start + k) % self.size] for k in range(width)]


def default_order() -> WheelOrder:
    """hardware/wheel.json's order, read by the project's wheel loader."""
    from rmc.sim.wheel import load_wheel

    w = load_wheel()
    return WheelOrder(tuple(w.pockets), str(w.raw.get("name", "wheel.json")))


def order_of(wheel: Any) -> WheelOrder | None:
    """The order a trace header's `wheel` names (a wheel.json as a dict); None when it has
    no usable `pockets` list (an import's "unknown")."""
    if not isinstance(wheel, dict) or not isinstance(wheel.get("pockets"), list):
        return None
    pockets: Sequence[Any] = wheel["pockets"]
    try:
        return WheelOrder(tuple(str(p) for p in pockets), str(wheel.get("name", "trace")))
    except ValueError:
        return None
