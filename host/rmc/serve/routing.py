"""What every route of the service shares: who calls it, what it looks up, how it answers.

- the operator a request's bearer token belongs to (401 without one), and the audit log
  that keeps every refused request;
- the table a route names (404 if the service runs no such table) and the store (503
  while the service starts);
- times: each `*_us` field of an answer is also given as ISO 8601 UTC;
- a Server-Sent Events stream of the event bus.

`rmc.serve.api` (the JSON API) and `rmc.serve.page_routes` (the web pages) build on it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.responses import StreamingResponse

from rmc.serve.config import Operator
from rmc.serve.service import Service
from rmc.serve.store import Store, StoreError

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MAX_LAST = 10_000
SSE_QUEUE = 1000  # events a slow client may lag behind before it is dropped
SSE_PING_S = 15.0
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


# --- times ------------------------------------------------------------------------------------


def iso(us: int | None) -> str | None:
    """Microseconds since the epoch -> ISO 8601 UTC with milliseconds (exact, no float)."""
    if us is None:
        return None
    t = _EPOCH + dt.timedelta(microseconds=us)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def times(row: dict[str, Any]) -> dict[str, Any]:
    """Each `*_us` field also given as ISO 8601 (`at_us` -> `at`)."""
    out = dict(row)
    for k, v in row.items():
        if k.endswith("_us") and (v is None or isinstance(v, int)):
            out[k[:-3]] = iso(v)
    return out


def deep_times(value: Any) -> Any:
    """`times` applied to every dict within `value`, however deep."""
    if isinstance(value, dict):
        return times({k: deep_times(v) for k, v in value.items()})
    if isinstance(value, list):
        return [deep_times(v) for v in value]
    return value


# --- who calls, and the audit log -------------------------------------------------------------


def audit(request: Request, status: int, reason: str, op: Operator | None = None) -> None:
    """A refused request, on record (the audit log)."""
    service: Service = request.app.state.service
    row = {
        "at_us": time.time_ns() // 1000,
        "who": op.name if op else None,
        "role": op.role if op else None,
        "method": request.method,
        "path": request.url.path,
        "status": status,
        "reason": reason,
    }
    try:
        assert service.store is not None
        service.store.audit(row)
    except StoreError:
        pass  # the refusal stands; the writer's health shows the database is down


def operator(request: Request) -> Operator:
    """The operator the request's bearer token belongs to; 401 (kept in the audit) if none."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    cfg = request.app.state.service.config
    op = cfg.operator(token) if scheme.lower() == "bearer" and token.strip() else None
    if op is None:
        why = "no token" if not header else "unknown token"
        audit(request, 401, why)
        raise HTTPException(401, why, headers={"WWW-Authenticate": "Bearer"})
    return op


Op = Annotated[Operator, Depends(operator)]


# --- what a route looks up --------------------------------------------------------------------


@dataclass(frozen=True)
class Lookup:
    """What a route looks up before it answers, refused in one line when it is not there."""

    service: Service

    def table(self, table: str) -> None:
        """404 unless the service runs `table`."""
        if table not in self.service.runners:
            raise HTTPException(404, f"no table {table!r}")

    def store(self) -> Store:
        """The service's store; 503 while the service starts and has none yet."""
        if self.service.store is None:
            raise HTTPException(503, "the service is starting")
        return self.service.store


# --- Server-Sent Events -----------------------------------------------------------------------


def sse(ev: dict[str, Any], ident: Any) -> str:
    """One event as Server-Sent Events text, its `*_us` times also in ISO 8601."""
    data = json.dumps(times(ev), separators=(",", ":"))
    return f"id: {ident}\nevent: {ev.get('type', 'event')}\ndata: {data}\n\n"


def stream(
    service: Service,
    pick: Callable[[dict[str, Any]], dict[str, Any] | None],
    producer: Callable[[asyncio.Queue], Awaitable[None]] | None = None,
) -> StreamingResponse:
    """A Server-Sent Events stream of the bus's events that `pick` keeps (as it returns
    them), and of what `producer` puts in the queue. A client that falls SSE_QUEUE events
    behind is cut off: it reconnects and reads what it missed from the API."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def listener(ev: dict[str, Any]) -> bool:
        out = pick(ev)
        if out is None:
            return True
        if inbox.qsize() >= SSE_QUEUE:
            loop.call_soon_threadsafe(inbox.put_nowait, None)  # the end of this stream
            return False
        loop.call_soon_threadsafe(inbox.put_nowait, out)
        return True

    key = service.bus.subscribe(listener)

    async def lines():
        task = asyncio.create_task(producer(inbox)) if producer is not None else None
        try:
            yield ": rmc serve events\n\n"
            while True:
                try:
                    ev = await asyncio.wait_for(inbox.get(), SSE_PING_S)
                except TimeoutError:
                    yield ": ping\n\n"
                    continue
                if ev is None:
                    return
                yield sse(ev, ev.get("id", ""))
        finally:
            service.bus.unsubscribe(key)
            if task is not None:
                task.cancel()

    return StreamingResponse(lines(), media_type="text/event-stream", headers=SSE_HEADERS)
