"""The live view's web side: a page and a read-only JSON API over the current snapshot.

Starlette (routing, requests, streaming responses) on uvicorn (the ASGI server), both on
127.0.0.1 only. Every handler reads ``replay.snapshot`` -- an immutable copy the replay
thread publishes (twinmatch/view.py) -- and nothing else: no handler calls into a book,
so no request can slow the replay down or see a book half-updated. Updates reach the page
as server-sent events (``/api/stream``): one frame per new snapshot, at most ``FPS`` a
second, for the symbol the page shows.

Errors are JSON with a 4xx status: ``{"error": "..."}`` naming the parameter or symbol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from importlib import resources
from typing import Any, Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from twinmatch.view import FPS, MAX_DEPTH, LiveReplay, Snapshot, clock_text

HOST: Final = "127.0.0.1"
DEFAULT_DEPTH: Final = 10
MAX_TRADES: Final = 40
# How often a stream looks for a new snapshot: a quarter of a frame interval, so a frame
# leaves within about 10 ms of its snapshot (a look is one attribute read).
POLL_S: Final = 0.25 / FPS
STATIC: Final = {"/": ("index.html", "text/html; charset=utf-8"),
                 "/view.js": ("view.js", "text/javascript; charset=utf-8"),
                 "/view.css": ("view.css", "text/css; charset=utf-8")}


class BadRequest(HTTPException):
    pass


def _int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(400, f"{name} must be an integer {lo}..{hi}, not {raw!r}") from None
    if not lo <= value <= hi:
        raise BadRequest(400, f"{name} must be {lo}..{hi}, not {value}")
    return value


def book_json(snap: Snapshot, symbol: str, depth: int) -> dict[str, Any]:
    book = snap.books.get(symbol)
    if book is None:
        raise HTTPException(404, f"unknown symbol {symbol!r} (see /api/symbols)")
    return {"symbol": symbol, "locate": book["locate"], "depth": depth,
            "messages": snap.messages, "clock_ns": snap.clock_ns,
            "bids": [list(level) for level in book["bids"][:depth]],
            "asks": [list(level) for level in book["asks"][:depth]]}


def stats_json(replay: LiveReplay, snap: Snapshot) -> dict[str, Any]:
    return {"file": str(replay.path), "impl": replay.impl, "mode": replay.mode,
            "speed": replay.speed, "version": snap.version, "messages": snap.messages,
            "clock_ns": snap.clock_ns, "clock": clock_text(snap.clock_ns),
            "fraction": snap.fraction, "done": snap.done, "error": snap.error,
            "fills": snap.fills, "volume": snap.volume, "live_orders": snap.live_orders,
            "messages_per_s": round(snap.messages_per_s, 1), "symbols": len(snap.books),
            "active": list(snap.active), "histogram": snap.histogram,
            "snapshot_share": round(replay.publish_seconds
                                    / max(replay.run_seconds(), 1e-9), 4)}


def make_app(replay: LiveReplay) -> Starlette:
    """The ASGI application over one LiveReplay (started and stopped with the app)."""

    def current() -> Snapshot:
        return replay.snapshot  # one attribute read: the whole snapshot, old or new

    async def page(request: Request) -> Response:
        name, kind = STATIC[request.url.path]
        body = resources.files("twinmatch").joinpath("view_static", name).read_bytes()
        return Response(body, media_type=kind, headers={"Cache-Control": "no-cache"})

    async def symbols(request: Request) -> Response:
        snap = current()
        return JSONResponse({"messages": snap.messages, "symbols": [
            {"symbol": s, "locate": b["locate"]} for s, b in sorted(snap.books.items())]})

    async def book(request: Request) -> Response:
        depth = _int_param(request, "depth", DEFAULT_DEPTH, 1, MAX_DEPTH)
        return JSONResponse(book_json(current(), request.path_params["symbol"], depth))

    async def bbo(request: Request) -> Response:
        snap = current()
        out = {s: {"bid": list(b["bids"][0][:2]) if b["bids"] else None,
                   "ask": list(b["asks"][0][:2]) if b["asks"] else None}
               for s, b in sorted(snap.books.items())}
        return JSONResponse({"messages": snap.messages, "clock_ns": snap.clock_ns,
                             "bbo": out})

    async def stats(request: Request) -> Response:
        return JSONResponse(stats_json(replay, current()))

    async def trades(request: Request) -> Response:
        n = _int_param(request, "n", MAX_TRADES, 1, MAX_TRADES)
        snap = current()
        return JSONResponse({"messages": snap.messages, "trades": list(snap.tape[:n])})

    async def stream(request: Request) -> Response:
        symbol = request.query_params.get("symbol", "")
        depth = _int_param(request, "depth", DEFAULT_DEPTH, 1, MAX_DEPTH)
        if symbol and symbol not in current().books and current().done:
            raise HTTPException(404, f"unknown symbol {symbol!r} (see /api/symbols)")
        return StreamingResponse(_frames(request, replay, symbol, depth),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return JSONResponse({"error": detail}, status_code=status)

    routes = [Route(path, page) for path in STATIC] + [
        Route("/api/symbols", symbols), Route("/api/book/{symbol}", book),
        Route("/api/bbo", bbo), Route("/api/stats", stats), Route("/api/trades", trades),
        Route("/api/stream", stream)]
    return Starlette(routes=routes, exception_handlers={HTTPException: error})


async def _frames(request: Request, replay: LiveReplay, symbol: str,
                  depth: int) -> AsyncIterator[str]:
    """Server-sent events: a frame whenever a new snapshot is out (at most FPS a second),
    and a comment line after five quiet seconds, so a closed connection is noticed."""
    seen, quiet = -1, 0  # (a frame per snapshot: at most FPS a second)
    while not replay.stop.is_set():
        snap = replay.snapshot
        if snap.version != seen:
            seen, quiet = snap.version, 0
            frame: dict[str, Any] = {"stats": stats_json(replay, snap),
                                     "trades": list(snap.tape[:MAX_TRADES]),
                                     "changed_ms": snap.changed_ms}
            chosen = symbol or (snap.active[0]["symbol"] if snap.active else "")
            if chosen in snap.books:
                frame["book"] = book_json(snap, chosen, depth)
            yield f"data: {json.dumps(frame, separators=(',', ':'))}\n\n"
        else:
            quiet += 1
            if quiet % int(5 / POLL_S) == 0:
                yield ": idle\n\n"
        if await request.is_disconnected():
            return
        await asyncio.sleep(POLL_S)


def listen(port: int) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:port (0: any free port), listening."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port must be 0..65535, not {port}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"127.0.0.1:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock


def serve(replay: LiveReplay, sock: socket.socket) -> None:
    """Serve until SIGINT or SIGTERM (uvicorn's handlers), then stop the replay."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            replay.stop.set()  # first: the event streams end, so shutdown need not wait
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            """SIGINT and SIGTERM stop the server, and the command exits with 0 (uvicorn
            would raise the signal again once stopped: a traceback, or status 143)."""
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            old = {sig: signal.signal(sig, self.handle_exit)
                   for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(make_app(replay), log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=2)
    server = Server(config)
    replay.start()
    try:
        server.run(sockets=[sock])
    finally:
        replay.close()


class BackgroundServer:
    """The view served from a thread of this process (tests, benchmarks, a notebook):
    the replay and the server start on entering, and both stop, bounded, on leaving."""

    def __init__(self, replay: LiveReplay, port: int = 0, timeout: float = 30.0) -> None:
        import uvicorn

        self.replay, self.timeout = replay, timeout
        self.sock = listen(port)
        self.port: int = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(
            make_app(replay), log_level="warning", lifespan="off",
            timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="twinmatch-view-server", daemon=True)

    def __enter__(self) -> BackgroundServer:
        self.replay.start()
        self.thread.start()
        deadline = time.monotonic() + self.timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                self.__exit__()
                raise RuntimeError(f"the view's server did not start in {self.timeout} s")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.replay.stop.set()
        self.server.should_exit = True
        self.thread.join(self.timeout)
        self.replay.close(self.timeout)
        self.sock.close()


def stream_frames(port: int, frames: int, query: str = "", timeout: float = 30.0,
                  on_frame: Callable[[dict[str, Any], float], None] | None = None
                  ) -> list[dict[str, Any]]:
    """The first ``frames`` frames of /api/stream, read from a plain socket (a client
    without a browser: tests and benchmarks), or fewer: what came in ``timeout`` seconds,
    or before the server closed the stream. ``on_frame(frame, wall_ms_at_arrival)``."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(f"GET /api/stream{query} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        buf = b""
        while len(out) < frames and time.monotonic() < deadline:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                chunk = s.recv(1 << 16)
            except TimeoutError:
                break
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if line.startswith(b"data: "):
                        frame = json.loads(line[6:])
                        if on_frame is not None:
                            on_frame(frame, time.time() * 1e3)
                        out.append(frame)
    return out
