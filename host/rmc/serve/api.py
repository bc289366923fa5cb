"""The service's HTTP API: JSON over HTTP, an OpenAPI description, a live event stream.

Every request but `/api/health` and the OpenAPI pages carries an operator's token
(`Authorization: Bearer TOKEN`). Any role reads; the chef de table opens, announces the last
three, closes and recalls; an engineer may also set thresholds. A request without a valid
token (401) or with too low a role (403) is refused and kept in the audit log.
docs/serve.md lists the routes; `rmc.serve.routing` holds what they share, and
`rmc.serve.page_routes` the web pages' own.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from rmc import __version__
from rmc.serve import orders, page_routes
from rmc.serve.routing import (
    MAX_LAST,
    SSE_PING_S,
    SSE_QUEUE,
    Lookup,
    Op,
    audit,
    deep_times,
    iso,
    stream,
    times,
)
from rmc.serve.service import Service, UnknownTable
from rmc.serve.store import StoreError

__all__ = ["MAX_LAST", "SSE_PING_S", "SSE_QUEUE", "create_app", "iso"]

Last = Query(ge=1, le=MAX_LAST)


def create_app(service: Service) -> FastAPI:
    """The service's app: the API's routes, then the web pages' (the order they match in)."""
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
    app.exception_handler(StoreError)(_store_error)
    look = Lookup(service)
    _add_table_routes(app, service, look)
    _add_log_routes(app, look)
    _add_command_routes(app, service, look)
    _add_event_stream(app, service, look)
    page_routes.add_page_routes(app, service, look)
    return app


async def _store_error(request: Request, e: StoreError) -> JSONResponse:
    return JSONResponse({"detail": f"database: {e}"}, status_code=503)


def _add_table_routes(app: FastAPI, service: Service, look: Lookup) -> None:
    """The service's health, and the tables: their state, results, spins and sessions."""

    @app.get("/api/health", summary="the service, its database and its tables at a glance")
    def health() -> dict[str, Any]:
        return service.health()

    @app.get("/api/tables", summary="every table: link health, state, session, faults")
    def tables(op: Op) -> dict[str, Any]:
        stored = {t["id"]: t for t in look.store().tables()}
        out = []
        for tid in service.runners:
            info = service.table_info(tid)
            info["stored"] = times(stored.get(tid, {}))
            out.append(info)
        return {"tables": out}

    @app.get("/api/tables/{table}", summary="one table: link health, state, session, faults")
    def table(table: str, op: Op) -> dict[str, Any]:
        look.table(table)
        return service.table_info(table)

    @app.get("/api/tables/{table}/results", summary="the last N results, newest first")
    def results(table: str, op: Op, last: Annotated[int, Last] = 10) -> dict[str, Any]:
        look.table(table)
        return {"results": [times(r) for r in look.store().results(table, last)]}

    @app.get("/api/tables/{table}/spins/{spin}", summary="a spin's full record: its frames")
    def spin(table: str, spin: int, op: Op) -> dict[str, Any]:
        look.table(table)
        rec = look.store().spin(table, spin)
        if rec is None:
            raise HTTPException(404, f"no spin {spin} on table {table}")
        return deep_times(rec)

    @app.get("/api/tables/{table}/sessions", summary="sessions, newest first")
    def sessions(table: str, op: Op, last: Annotated[int, Last] = 50) -> dict[str, Any]:
        look.table(table)
        return {"sessions": [times(r) for r in look.store().sessions(table, last)]}


def _add_log_routes(app: FastAPI, look: Lookup) -> None:
    """A table's recorded events, by kind, and its operators' commands, newest first."""

    def events_route(name: str, kinds: tuple[str, ...]) -> None:
        def handler(table: str, op: Op, last: Annotated[int, Last] = 100) -> dict[str, Any]:
            look.table(table)
            return {name: [times(r) for r in look.store().events(table, kinds or None, last)]}

        app.get(f"/api/tables/{{table}}/{name}", summary=f"{name}, newest first")(handler)

    events_route("faults", ("fault",))
    events_route("violations", ("violation", "rejected"))
    events_route("alerts", ("alert",))
    events_route("voids", ("void",))
    events_route("settings", ("setting",))
    events_route("events", ())

    @app.get("/api/tables/{table}/commands", summary="operator commands and the answers")
    def commands(table: str, op: Op, last: Annotated[int, Last] = 100) -> dict[str, Any]:
        look.table(table)
        return {"commands": [times(r) for r in look.store().commands(table, last)]}


def _add_command_routes(app: FastAPI, service: Service, look: Lookup) -> None:
    """An operator's command to a table (by role), and the audit log (engineers only)."""

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
        look.table(table)
        if verb not in orders.VERBS:
            raise HTTPException(404, f"no command {verb!r} (one of {', '.join(orders.VERBS)})")
        if not orders.allowed(op.role, verb):
            audit(request, 403, f"role {op.role} may not {verb}", op)
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
    def audit_log(request: Request, op: Op, last: Annotated[int, Last] = 100) -> dict[str, Any]:
        if op.role != "engineer":
            audit(request, 403, f"role {op.role} may not read the audit log", op)
            raise HTTPException(403, "only an engineer reads the audit log")
        return {"audit": [times(r) for r in look.store().audit_log(last)]}


def _add_event_stream(app: FastAPI, service: Service, look: Lookup) -> None:
    """The live events of every table, or of one (Server-Sent Events)."""

    @app.get("/api/events", summary="live events (Server-Sent Events): results, states, faults")
    async def events(request: Request, op: Op, table: str | None = None) -> StreamingResponse:
        if table is not None:
            look.table(table)
        return _event_stream(service, table)


def _event_stream(service: Service, table: str | None) -> StreamingResponse:
    """The bus's events (of `table`, when given) as they come; a client SSE_QUEUE events
    behind is cut off, reconnects and reads what it missed from the API."""

    def pick(ev: dict[str, Any]) -> dict[str, Any] | None:
        return ev if table is None or ev.get("table") in (None, table) else None

    return stream(service, pick)
