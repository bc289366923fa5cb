"""The web pages' routes (docs/pages.md): their files, and what they read beyond the API.

The display's routes are public: they show what a results board shows anyway. The
engineer's and the console's carry a token, as every other route. What the pages show is
computed in `rmc.serve.pages`; these routes only look it up and answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import FastAPI, Query
from fastapi.responses import FileResponse, StreamingResponse
from starlette.staticfiles import StaticFiles

from rmc.serve import pages
from rmc.serve.routing import Lookup, Op, deep_times, stream, times
from rmc.serve.service import Service
from rmc.serve.store import StoreError

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


def add_page_routes(app: FastAPI, service: Service, look: Lookup) -> None:
    """The pages, their files, and the routes they read besides the API's own."""
    _add_page_files(app, look)
    _add_display_routes(app, service, look)
    _add_engineer_routes(app, service, look)


def _page(name: str) -> FileResponse:
    return FileResponse(pages.WEB_DIR / name, media_type="text/html", headers=PAGE_HEADERS)


def _add_page_files(app: FastAPI, look: Lookup) -> None:
    """The pages' files, each page at its table's address, and who a page's token is."""
    app.mount("/static", StaticFiles(directory=pages.WEB_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return _page("index.html")

    def page_route(kind: str, file: str) -> None:
        def handler(table: str) -> FileResponse:
            look.table(table)
            return _page(file)

        app.get(f"/{kind}/{{table}}", include_in_schema=False)(handler)

    for kind, file in pages.PAGES.items():
        page_route(kind, file)

    @app.get("/api/whoami", summary="the operator a token belongs to: name and role")
    def whoami(op: Op) -> dict[str, Any]:
        return {"name": op.name, "role": op.role}


def _add_display_routes(app: FastAPI, service: Service, look: Lookup) -> None:
    """What a players' results display reads (no token), and the wheel it draws."""

    @app.get("/api/display", summary="the tables a display may show (no token)")
    def display_tables() -> dict[str, Any]:
        return {"tables": list(service.runners)}

    @app.get("/api/display/{table}", summary="what a results display shows (no token)")
    def display(
        table: str, last: Annotated[int, Query(ge=1, le=100)] = pages.MARQUEE
    ) -> dict[str, Any]:
        look.table(table)
        look.store()
        snap = pages.display_snapshot(service, table, last)
        snap["results"] = [times(r) for r in snap["results"]]
        return snap

    @app.get("/api/display/{table}/events", summary="a display's live events (no token)")
    async def display_events(table: str) -> StreamingResponse:
        look.table(table)
        return stream(service, lambda ev: pages.public_event(ev, table))

    @app.get("/api/wheel", summary="the wheel's pockets in channel order, with their colours")
    def wheel() -> dict[str, Any]:
        return pages.wheel()


def _add_engineer_routes(app: FastAPI, service: Service, look: Lookup) -> None:
    """The engineer's live view and the console's thresholds and lead (with a token)."""

    @app.get("/api/tables/{table}/live", summary="the engineer's view: spin, link, log tail")
    def live(table: str, op: Op) -> dict[str, Any]:
        look.table(table)
        look.store()
        return deep_times(pages.live_snapshot(service, table))

    @app.get("/api/tables/{table}/thresholds", summary="thresholds: default, range, last set")
    def thresholds(table: str, op: Op) -> dict[str, Any]:
        look.table(table)
        st = look.store()
        return {"thresholds": pages.thresholds(st, table), "lead": pages.lead_in_force(st, table)}

    @app.get("/api/tables/{table}/lead", summary="the lead of « rien ne va plus » in force")
    def lead(table: str, op: Op) -> dict[str, Any]:
        look.table(table)
        return pages.lead_in_force(look.store(), table)

    @app.get(
        "/api/tables/{table}/live/events",
        summary="the table's live events and every frame stored (Server-Sent Events)",
    )
    async def live_events(table: str, op: Op) -> StreamingResponse:
        look.table(table)

        def pick(ev: dict[str, Any]) -> dict[str, Any] | None:
            return ev if ev.get("table") in (None, table) else None

        return stream(service, pick, _frame_feed(service, table))


def _read_frames(store: Any, table: str, since_us: int) -> list[Any]:
    return list(store.frames(table, since_us))


def _frame_feed(service: Service, table: str) -> Callable[[asyncio.Queue], Awaitable[None]]:
    """A producer of the table's frames as the store receives them (the bus does not carry
    frames), for `routing.stream`: it reads the store every FRAME_POLL_S, again over
    FRAME_OVERLAP_US before the newest frame seen, and skips the frames it has sent."""

    async def frames(inbox: asyncio.Queue) -> None:
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

    return frames
