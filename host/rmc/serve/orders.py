"""The operators' commands: who may give which, and the firmware command each one becomes.

One table of verbs serves `rmc table`, the HTTP API and the service: a verb, the role that
may give it, and how its arguments become the firmware command's fields (docs/protocol.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmcfw import config as fwconfig
from rmcfw import proto

ROLES = ("display", "chef", "engineer")  # each may do what the ones before it may
_RANK = {r: i for i, r in enumerate(ROLES)}
MAX_TEXT = 60  # a name or a reason: the command must fit in a frame line


class OrderError(ValueError):
    """An order the service refuses before it reaches the table (one-line reason)."""


@dataclass(frozen=True)
class Verb:
    name: str
    cmd: str  # the firmware command
    role: str  # the lowest role that may give it


VERBS = {
    v.name: v
    for v in (
        Verb("status", proto.C_STATUS, "chef"),
        Verb("open", proto.C_OPEN, "chef"),
        Verb("last3", proto.C_LAST_THREE, "chef"),
        Verb("close", proto.C_CLOSE, "chef"),
        Verb("recall", proto.C_RECALL, "chef"),
        Verb("set", proto.C_SET, "engineer"),
    )
}


def allowed(role: str, verb: str) -> bool:
    v = VERBS.get(verb)
    return v is not None and role in _RANK and _RANK[role] >= _RANK[v.role]


def _text(what: str, value: object) -> str:
    text = str(value) if value is not None else ""
    if not text.strip():
        raise OrderError(f"{what} is empty")
    if len(text) > MAX_TEXT:
        raise OrderError(f"{what} is longer than {MAX_TEXT} characters")
    if not text.isprintable():
        raise OrderError(f"{what} holds a control character")
    return text


def _uint(what: str, value: object, lo: int, hi: int) -> int:
    text = str(value).strip()
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise OrderError(f"{what} must be a whole number from {lo} to {hi}, not {value!r}")
    return int(text)


def fields(verb: str, args: dict[str, object], by: str, role: str) -> tuple:
    """The firmware command's fields for an order; OrderError for what is wrong with it.

    args: open {"chef"}; close {"reason"?}; recall {"n"?}; set {"key", "value"}, sent with
    the operator's name and role: the table's CFG frame records who asked, and as what.
    The chef de table who opened is named again on CLOSE (the firmware records it).
    """
    if verb not in VERBS:
        raise OrderError(f"no command {verb!r} (one of {', '.join(VERBS)})")
    if verb == "open":
        return ("chef", _text("chef", args.get("chef")))
    if verb == "close":
        out: tuple = ("chef", _text("operator", by))
        if args.get("reason") is not None:
            out += ("reason", _text("reason", args["reason"]))
        return out
    if verb == "recall":
        n = args.get("n")
        return () if n is None else ("n", _uint("n", n, 1, 500))
    if verb == "set":
        key = str(args.get("key", ""))
        if key not in fwconfig.keys():
            raise OrderError(f"no threshold {key!r} (one of {', '.join(sorted(fwconfig.keys()))})")
        lo, hi = fwconfig.bounds(key)
        value = _uint(key, args.get("value"), lo, hi)
        # the table itself refuses a later call without role=engineer (rmcfw.lead)
        return ("key", key, "value", value, "by", by, "role", role)
    return ()
