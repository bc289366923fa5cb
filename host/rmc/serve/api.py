"""The service's HTTP API: JSON over HTTP, an OpenAPI description, a live event stream.

Every request but `/api/health` and the OpenAPI pages carries an operator's token
(`Authorization: Bearer TOKEN`). Any role reads; the chef de table opens, announces the last
three, closes and recalls; an engineer may also set thresholds. A request without a valid
token (401) or with too low a role (403) is refused and kept in the audit log.
docs/serve.md lists the routes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from starlette.staticfiles import StaticFiles

from rmc import __version__
from rmc.serve import orders, pages
from rmc.serve.config import Operator
from rmc.serve.service import Service, UnknownTable
from rmc.serve.store import StoreError

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MAX_LAST = 10_000
SSE_QUEUE = 1000  # events a slow client may lag behind before it is dropped
SSE_PING_S = 15.0


def iso(us: int | None) -> str | None:
    """Microseconds since the epoch -> ISO 8601 UTC with milliseconds (exact, no float)."""
    if us is None:
        return None
    t = _EPOCH + dt.timedelta(microseconds=us)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _times(row: dict[str, Any]) -> dict[str, Any]:
    """Each `*_us` field also given as ISO 8601 (`at_us` -> `at`)."""
    out = dict(row)
    for k, v in row.items():
        if k.endswith("_us") and (v is None or isinstance(v, int)):
            out[k[:-3]] = iso(v)
    return out


def _audit(request: Request, status: int, reason: str, op: Operator | None = None) -> None:
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


def _operator(request: Request) -> Operator:
    """The operator the request's bearer token belongs to; 401 (kept in the audit) if none."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    cfg = request.app.state.service.config
    op = cfg.operator(token) if scheme.lower() == "bearer" and token.strip() else None
    if op is None:
        why = "no token" if not header else "unknown token"
        _audit(request, 401, why)
        raise HTTPException(401, why, headers={"WWW-Authenticate": "Bearer"})
    return op


Op = Annotated[Operator, Depends(_operator)]


def create_app(service: Service) -> FastAPI:
    app = FastAPI(
        title="rmc serve",
        version=__version__,
        description="Live Roulette Monte-Carlo tables: state, results, sessions, faults, "
        "operator commands and a live event stream.",
        # the interactive pages load their scripts from the Internet: /openapi.json only
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service

    def table_or_404(table: str) -> None:
        if table not in service.runners:
            raise HTTPException(404, f"no table {table!r}")

    def store():
        if service.store is None:
            raise HTTPException(503, "the service is starting")
        return service.store

    @app.exception_handler(StoreError)
    async def _store_error(request: Request, e: StoreError) -> JSONResponse:
        return JSONResponse({"detail": f"database: {e}"}, status_code=503)

    @app.get("/api/health", summary="the service, its database and its tables at a glance")
    def health() -> dict[str, Any]:
        return service.health()

    @app.get("/api/tables", summary="every table: link health, state, session, faults")
    def tables(op: Op) -> dict[str, Any]:
        stored = {t["id"]: t for t in store().tables()}
        out = []
        for tid in service.runners:
            info = service.table_info(tid)
            info["stored"] = _times(stored.get(tid, {}))
            out.append(info)
        return {"tables": out}

    @app.get("/api/tables/{table}", summary="one table: link health, state, session, faults")
    def table(table: str, op: Op) -> dict[str, Any]:
        table_or_404(table)
        return service.table_info(table)

    @app.get("/api/tables/{table}/results", summary="the last N results, newest first")
    def results(
        table: str,
        op: Op,
        last: Annotated[int, Query(ge=1, le=MAX_LAST)] = 10,
    ) -> dict[str, Any]:
        table_or_404(table)
        return {"results": [_times(r) for r in store().results(table, last)]}

    @app.get("/api/tables/{table}/spins/{spin}", summary="a spin's full record: its frames")
    def spin(table: str, spin: int, op: Op) -> dict[str, Any]:
        table_or_404(table)
        rec = store().spin(table, spin)
        if rec is None:
            raise HTTPException(404, f"no spin {spin} on table {table}")
        return _deep_times(rec)

    @app.get("/api/tables/{table}/sessions", summary="sessions, newest first")
    def sessions(
        table: str,
        op: Op,
        last: Annotated[int, Query(ge=1, le=MAX_LAST)] = 50,
    ) -> dict[str, Any]:
        table_or_404(table)
        return {"sessions": [_times(r) for r in store().sessions(table, last)]}

    def events_route(name: str, kinds: tuple[str, ...]) -> None:
        def handler(
            table: str,
            op: Op,
            last: Annotated[int, Query(ge=1, le=MAX_LAST)] = 100,
        ) -> dict[str, Any]:
            table_or_404(table)
            return {name: [_times(r) for r in store().events(table, kinds or None, last)]}

        app.get(f"/api/tables/{{table}}/{name}", summary=f"{name}, newest first")(handler)

    events_route("faults", ("fault",))
    events_route("violations", ("violation", "rejected"))
    events_route("alerts", ("alert",))
    events_route("voids", ("void",))
    events_route("settings", ("setting",))
    events_route("events", ())

    @app.get("/api/tables/{table}/commands", summary="operator commands and the answers")
    def commands(
        table: str,
        op: Op,
        last: Annotated[int, Query(ge=1, le=MAX_LAST)] = 100,
    ) -> dict[str, Any]:
        table_or_404(table)
        return {"commands": [_times(r) for r in store().commands(table, last)]}

    @app.post(
        "/api/tables/{table}/commands/{verb}",
        summary="an operator command: status, open, last3, close, recall, set",
    )
    def command(
        table: str,
        verb: str,
        request: Request,
        op: Op,
        args: Annotated[dict[str, Any] | None, Body()] = None,
    ) -> JSONResponse:
        table_or_404(table)
        if verb not in orders.VERBS:
            raise HTTPException(404, f"no command {verb!r} (one of {', '.join(orders.VERBS)})")
        if not orders.allowed(op.role, verb):
            _audit(request, 403, f"role {op.role} may not {verb}", op)
            raise HTTPException(403, f"a {op.role} may not give the command {verb}")
        try:
            out = service.order(table, verb, args or {}, op)
        except orders.OrderError as e:
            raise HTTPException(400, str(e)) from None
        except UnknownTable:
            raise HTTPException(404, f"no table {table!r}") from None
        if "error" in out:
            code = 503 if "not connected" in out["error"] or "port" in out["error"] else 504
            return JSONResponse(out, status_code=code)
        return JSONResponse(out, status_code=200)

    @app.get("/api/audit", summary="refused requests (engineers only)")
    def audit_log(
        request: Request,
        op: Op,
        last: Annotated[int, Query(ge=1, le=MAX_LAST)] = 100,
    ) -> dict[str, Any]:
        if op.role != "engineer":
            _audit(request, 403, f"role {op.role} may not read the audit log", op)
            raise HTTPException(403, "only an engineer reads the audit log")
        return {"audit": [_times(r) for r in store().audit_log(last)]}

    @app.get("/api/events", summary="live events (Server-Sent Events): results, states, faults")
    async def events(request: Request, op: Op, table: str | None = None) -> StreamingResponse:
        if table is not None:
            table_or_404(table)
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue(SSE_QUEUE)

        def listener(ev: dict[str, Any]) -> bool:
            if table is not None and ev.get("table") not in (None, table):
                return True
            if inbox.qsize() >= SSE_QUEUE - 1:
                return False
            loop.call_soon_threadsafe(inbox.put_nowait, ev)
            return True

        key = service.bus.subscribe(listener)

        async def stream():
            try:
                yield ": rmc serve events\n\n"
                while True:
                    try:
                        ev = await asyncio.wait_for(inbox.get(), SSE_PING_S)
                    except TimeoutError:
                        yield ": ping\n\n"
                        continue
                    data = json.dumps(_times(ev), separators=(",", ":"))
                    yield f"id: {ev['id']}\nevent: {ev.get('type', 'event')}\ndata: {data}\n\n"
            finally:
                service.bus.unsubscribe(key)

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    _pages(app, service, table_or_404, store)
    return app


def _deep_times(value: Any) -> Any:
    if isinstance(value, dict):
        return _times({k: _deep_times(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_deep_times(v) for v in value]
    return value


# --- the web pages (docs/pages.md) and what they read beyond the routes above ---------------

# the pages load nothing but their own files, and are never framed (a console in a frame
# could be clicked through)
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}
FRAME_POLL_S = 0.3  # the engineer's stream reads the frames stored this often...
FRAME_OVERLAP_US = 3_000_000  # ... again over this much before the newest one it has seen
# (a row is committed a tick or more after its reception; frames seen already are skipped)


def _stream(
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

    async def stream():
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
                data = json.dumps(_times(ev), separators=(",", ":"))
                yield f"id: {ev.get('id', '')}\nevent: {ev.get('type', 'event')}\ndata: {data}\n\n"
        finally:
            service.bus.unsubscribe(key)
            if task is not None:
                task.cancel()

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def _read_frames(store: Any, table: str, since_us: int) -> list[Any]:
    return list(store.frames(table, since_us))


def _pages(app: FastAPI, service: Service, table_or_404: Callable, store: Callable) -> None:
    """The pages, their files, and the routes they read besides the API's own: the
    display's (public: what a results board shows anyway), the engineer's and the
    console's (with a token, as every other route)."""
    app.mount("/static", StaticFiles(directory=pages.WEB_DIR), name="static")

    def page(name: str) -> FileResponse:
        return FileResponse(pages.WEB_DIR / name, media_type="text/html", headers=PAGE_HEADERS)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return page("index.html")

    def page_route(kind: str, file: str) -> None:
        def handler(table: str) -> FileResponse:
            table_or_404(table)
            return page(file)

        app.get(f"/{kind}/{{table}}", include_in_schema=False)(handler)

    for kind, file in pages.PAGES.items():
        page_route(kind, file)

    @app.get("/api/whoami", summary="the operator a token belongs to: name and role")
    def whoami(op: Op) -> dict[str, Any]:
        return {"name": op.name, "role": op.role}

    @app.get("/api/display", summary="the tables a display may show (no token)")
    def display_tables() -> dict[str, Any]:
        return {"tables": list(service.runners)}

    @app.get("/api/display/{table}", summary="what a results display shows (no token)")
    def display(
        table: str, last: Annotated[int, Query(ge=1, le=100)] = pages.MARQUEE
    ) -> dict[str, Any]:
        table_or_404(table)
        store()
        snap = pages.display_snapshot(service, table, last)
        snap["results"] = [_times(r) for r in snap["results"]]
        return snap

    @app.get("/api/display/{table}/events", summary="a display's live events (no token)")
    async def display_events(table: str) -> StreamingResponse:
        table_or_404(table)
        return _stream(service, lambda ev: pages.public_event(ev, table))

    @app.get("/api/wheel", summary="the wheel's pockets in channel order, with their colours")
    def wheel() -> dict[str, Any]:
        return pages.wheel()

    @app.get("/api/tables/{table}/live", summary="the engineer's view: spin, link, log tail")
    def live(table: str, op: Op) -> dict[str, Any]:
        table_or_404(table)
        store()
        return _deep_times(pages.live_snapshot(service, table))

    @app.get("/api/tables/{table}/thresholds", summary="thresholds: default, range, last set")
    def thresholds(table: str, op: Op) -> dict[str, Any]:
        table_or_404(table)
        return {"thresholds": pages.thresholds(store(), table)}

    @app.get(
        "/api/tables/{table}/live/events",
        summary="the table's live events and every frame stored (Server-Sent Events)",
    )
    async def live_events(table: str, op: Op) -> StreamingResponse:
        table_or_404(table)

        def pick(ev: dict[str, Any]) -> dict[str, Any] | None:
            return ev if ev.get("table") in (None, table) else None

        async def frames(inbox: asyncio.Queue) -> None:
            """The frames as the store receives them (the bus does not carry frames)."""
            since = time.time_ns() // 1000 - FRAME_OVERLAP_US
            seen: dict[tuple[int, int], int] = {}
            while True:
                st = service.store
                if st is not None:
                    lo = since
                    try:
                        rows = await asyncio.to_thread(_read_frames, st, table, lo)
                    except StoreError:
                        rows = []  # the database is down: the writer's health says so
                    for r in rows:
                        if (r.boot, r.seq) in seen:
                            continue
                        seen[(r.boot, r.seq)] = r.rx_us
                        ev = pages.frame_event(r)
                        inbox.put_nowait(
                            {"id": f"f{r.boot}.{r.seq}", "type": "frame", "table": table, **ev}
                        )
                    newest = max((r.rx_us for r in rows), default=lo + FRAME_OVERLAP_US)
                    since = max(lo, newest - FRAME_OVERLAP_US)
                    seen = {k: v for k, v in seen.items() if v >= since}
                await asyncio.sleep(FRAME_POLL_S)

        return _stream(service, pick, frames)
