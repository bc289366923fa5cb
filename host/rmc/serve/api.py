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
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from rmc import __version__
from rmc.serve import orders
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

    return app


def _deep_times(value: Any) -> Any:
    if isinstance(value, dict):
        return _times({k: _deep_times(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_deep_times(v) for v in value]
    return value
