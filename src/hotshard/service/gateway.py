"""The HTTP gateway: FastAPI routes over ``ChatService``; errors as JSON, never a 500 for a
client's mistake.

Every message response carries ``X-Shard`` (the shard, or comma-separated shards, the data came
from) and ``X-Source`` (shard, cache or coalesced), so a load driver can break latency down per
shard without knowing the partitioner. So does every failure of a channel request whose channel
is valid (503 shard down, 504 shard timed out, 500, 4xx, 408 and 413 too): the shard that failed,
else the shard the router places the channel on, so a driver can put each failure in its
shard's row. ``/stats`` also says how channels are placed (``partitioner``, ``shard_count``,
``key_type``, ``layout`` at its top level) for a driver that attributes failures itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Header, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from hotshard.errors import IdempotencyConflict, InputError
from hotshard.mitigations import MAX_CACHE_TTL_S
from hotshard.service import httpguard
from hotshard.service.admin import ADMIN_TOKEN_ENV, AdminGuard, local_authority
from hotshard.service.chat import ChatService
from hotshard.service.mitigations import MAX_BUCKETS, MAX_REPLICAS, SERVICE_FIELDS, updated
from hotshard.service.router import CHANNEL_PATTERN, check_channel
from hotshard.service.stats import CpuMeter, LatencyHistogram, process_cpu_seconds
from hotshard.service.store import MAX_ID, MAX_LIMIT, MAX_USER_CHARS
from hotshard.service.supervisor import ShardError, ShardTimeout, ShardUnavailable

__all__ = ["create_app"]

CPU_SAMPLE_S = 1.0
Channel = Annotated[str, Path(pattern=CHANNEL_PATTERN, max_length=128,
                              description="Channel id: letters, digits, . _ : -")]


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str = Field(min_length=1, max_length=MAX_USER_CHARS,
                      pattern=r"^[^\x00-\x1f\x7f-\x9f]+$",
                      description="Who wrote it (no control characters).")
    body: str = Field(min_length=1, description="The text (UTF-8; size limit: --max-body).")


class Posted(BaseModel):
    id: int = Field(description="Message id: time-ordered, unique across shards.")
    channel: str
    shard: int


class MessageOut(BaseModel):
    id: int
    channel: str
    user: str
    body: str
    ts_ms: int


class Page(BaseModel):
    channel: str
    messages: list[MessageOut]
    next_before: int | None = Field(
        description="Pass as `before` for the next (older) page; null when this page is short.")


MITIGATIONS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "split_into": {"type": "integer", "minimum": 1, "maximum": MAX_BUCKETS,
                       "description": "time-bucket sub-partitions per hot channel (1: off)"},
        "split_bucket_ms": {"type": "integer", "minimum": 1},
        "replicas": {"type": "integer", "minimum": 1, "maximum": MAX_REPLICAS,
                     "description": "read nodes per shard, the primary included (1: none)"},
        "cache_ttl_s": {"type": "number", "minimum": 0, "maximum": MAX_CACHE_TTL_S},
        "coalesce": {"type": "boolean"},
        "channels": {"oneOf": [{"type": "string", "enum": ["hot"]},
                               {"type": "array", "items": {"type": "string",
                                                           "pattern": CHANNEL_PATTERN}}]},
        "hot_share": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}}}


class ErrorOut(BaseModel):
    error: str


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut}, 413: {"model": ErrorOut}, 422: {"model": ErrorOut},
    409: {"model": ErrorOut, "description": "The Idempotency-Key was used for another "
                                            "message (not a retry of it)."},
    500: {"model": ErrorOut, "description": "The channel's shard failed the request."},
    503: {"model": ErrorOut, "description": "The channel's shard is restarting; see "
                                            "Retry-After. For a write already handed to the "
                                            "shard: its outcome is unknown, and there is no "
                                            "Retry-After (retry with the same "
                                            "Idempotency-Key)."},
    504: {"model": ErrorOut, "description": "The channel's shard did not answer within the "
                                            "shard timeout (--shard-timeout). For a write: "
                                            "its outcome is unknown (the shard may still "
                                            "store it): retry with the same "
                                            "Idempotency-Key."}}
CHANNEL_PATH = re.compile(r"^/channels/([^/]+)/messages/?$")
# hotshard's errors and the status each is answered with, most specific first
ERROR_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (IdempotencyConflict, 409), (InputError, 400), (ShardUnavailable, 503),
    (ShardTimeout, 504), (ShardError, 500))
# what a 503/504 to a write handed to its shard adds: the client cannot know it failed
UNKNOWN_OUTCOME = ("the write may have been stored (its outcome is unknown): retry it with the "
                   "same Idempotency-Key to store it once, or read the channel to see")


# Declared for the OpenAPI document (clients see the admin routes need a bearer token); the
# check itself is AdminGuard's, which also looks at Host, Origin and the content type.
ADMIN_BEARER = HTTPBearer(auto_error=False, description="The admin token `hotshard serve` "
                          "prints at start (or --admin-token / " + ADMIN_TOKEN_ENV + ").")
ADMIN_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "No admin token, or a wrong one."},
    403: {"model": ErrorOut, "description": "Host does not name this service, or the Origin "
                                            "is another site's."},
    415: {"model": ErrorOut, "description": "The body is not sent as application/json."}}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _shard_header(shards: tuple[int, ...]) -> str:
    return ",".join(str(s) for s in shards)


class _BodyLimit:
    """Read a request's body before the app sees it, so a huge upload costs nothing and a slow
    one holds nothing for long. Pure ASGI: a Content-Length over the limit is refused unread
    (413); a body is otherwise read whole, refused as soon as it passes the limit (a chunked
    one), or with 408 when it is not complete within ``httpguard.BODY_TIMEOUT_S`` of the
    request head (a client that announces 100 bytes and sends 1 would otherwise hold its
    connection for ever), then handed on whole. Counting inside the app instead would surface
    as the app's own error (a 400 "error parsing the body", or a 500 once a response had
    started), and a route that never reads its body would leave the rest of it unbounded.
    Both refusals close the connection: the rest of the body is never read, so it cannot be
    reused. ``shard_of_path`` gives the ``X-Shard`` of a refused channel request."""

    def __init__(self, app: Any, max_bytes: int,
                 shard_of_path: Callable[[str], str | None] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.shard_of_path = shard_of_path

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await self._refuse(scope, receive, send, 413,
                               f"request body exceeds {self.max_bytes} bytes")
            return
        if (length is None or int(length) == 0) and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body
            return
        chunks: list[bytes] = []
        seen = 0
        timeout = httpguard.BODY_TIMEOUT_S  # read at each request, so a test can set it small
        try:
            async with asyncio.timeout(timeout):
                while seen <= self.max_bytes:
                    message = await receive()
                    if message["type"] != "http.request":
                        return  # the client went away
                    body = message.get("body", b"")
                    seen += len(body)
                    chunks.append(body)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await self._refuse(scope, receive, send, 408,
                               f"request body not complete within {timeout:g} s")
            return
        if seen > self.max_bytes:
            await self._refuse(scope, receive, send, 413,
                               f"request body exceeds {self.max_bytes} bytes")
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: dict, receive: Callable, send: Callable, status: int,
                      message: str) -> None:
        headers = {"Connection": "close"}
        shard = self.shard_of_path(scope.get("path", "")) if self.shard_of_path else None
        if shard is not None:
            headers["X-Shard"] = shard
        await _error(status, message, headers)(scope, receive, send)


def create_app(chat: ChatService, *, max_body_bytes: int, admin: AdminGuard) -> Any:
    """The gateway app over a running ``ChatService`` (whose workers the caller starts and
    stops: startup failures then surface as one clear error, not a server log). ``admin``
    guards the routes that change the service's configuration (``hotshard.service.admin``).
    Its parts: the answers to errors, the chat routes, the operator's routes."""
    gw = _Gateway(chat)
    app = FastAPI(title="hotshard reference chat-history service", version="1",
                  description="A chat-history service partitioned by channel over shard worker "
                              "processes, with hot-key mitigations. Every message response "
                              "carries X-Shard.", lifespan=gw.lifespan)
    _error_answers(app, gw)
    _chat_routes(app, gw, max_body_bytes)
    _operator_routes(app, gw, _admin_only(admin))
    return _BodyLimit(app, max_bytes=4 * max_body_bytes + 4096, shard_of_path=gw.shard_of_path)


class _Gateway:
    """What every route shares: the service, its start and CPU samples (``state``), and how
    an answer names the shard a channel lives on."""

    def __init__(self, chat: ChatService) -> None:
        self.state: dict[str, Any] = {"service": chat, "started": time.monotonic(), "cpu": {}}

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        sampler = asyncio.create_task(_sample_cpu(self.service(), self.state))
        try:
            yield
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler

    def service(self) -> ChatService:
        return self.state["service"]

    def home_shard(self, channel: object) -> str | None:
        """The shard the router places ``channel`` on (None: not a valid channel)."""
        try:
            return str(self.service().router.shard_of(check_channel(channel)))
        except InputError:
            return None

    def shard_of_path(self, path: str) -> str | None:
        match = CHANNEL_PATH.match(path)
        return self.home_shard(match.group(1)) if match else None

    def failed(self, request: Request, exc: Exception, status: int, message: str,
               headers: dict[str, str] | None = None) -> JSONResponse:
        """An error response; for a channel request, with the X-Shard of the shard that
        failed (``exc.shard``), else of the channel's shard."""
        headers = dict(headers or {})
        shard = getattr(exc, "shard", None)
        where = str(shard) if shard is not None else \
            self.home_shard(request.scope.get("path_params", {}).get("channel"))
        if where is not None:
            headers["X-Shard"] = where
        return _error(status, message, headers)


def _admin_only(admin: AdminGuard):
    """The dependency of the admin routes: ``admin``'s refusal as the answer, if any."""

    async def admin_only(request: Request,
                         _: Annotated[HTTPAuthorizationCredentials | None,
                                      Security(ADMIN_BEARER)] = None) -> None:
        refusal = admin.refusal(request.headers, request.method,
                                arrived_on=local_authority(request.scope.get("server")))
        if refusal is not None:
            raise StarletteHTTPException(refusal.status, refusal.message,
                                         dict(refusal.headers or {}))
    return admin_only


def _unknown_write(request: Request, exc: Exception) -> bool:
    """A write handed to its shard before the failure: it may have been stored."""
    return request.method == "POST" and bool(getattr(exc, "outcome_unknown", False)) \
        and CHANNEL_PATH.match(request.url.path) is not None


def _error_answers(app: FastAPI, gw: _Gateway) -> None:
    """Every failure answered as JSON with the shard it concerns: hotshard's errors by the
    one table (``ERROR_STATUS``), a bad request, an HTTP error, a bug."""
    failed = gw.failed

    async def hotshard_error(request: Request, exc: Exception) -> JSONResponse:
        """The one mapping of hotshard's errors to answers (``ERROR_STATUS``): a write
        handed to its shard before a 503/504 says its outcome is unknown and carries no
        Retry-After (a blind retry may store it twice); other 503s say when to retry."""
        status = next(code for kind, code in ERROR_STATUS if isinstance(exc, kind))
        if status in (503, 504) and _unknown_write(request, exc):
            return failed(request, exc, status, f"{exc}; {UNKNOWN_OUTCOME}")
        headers = ({"Retry-After": str(max(1, round(exc.retry_after)))}
                   if isinstance(exc, ShardUnavailable) else None)
        return failed(request, exc, status, str(exc), headers)

    for kind, _ in ERROR_STATUS:
        app.add_exception_handler(kind, hotshard_error)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        # a bug (Starlette logs the traceback after this answer): still JSON, still X-Shard
        return failed(request, exc, 500, f"internal error: {type(exc).__name__}")

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            if tuple(err.get("loc", ())) == ("body",) and err.get("type") in (
                    "model_attributes_type", "dict_type", "json_invalid", "missing"):
                return failed(request, exc, 422, "request body must be a JSON object "
                              "{\"user\": ..., \"body\": ...} sent with Content-Type: "
                              "application/json")
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "request"
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return failed(request, exc, 422, "; ".join(problems) or "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return failed(request, exc, exc.status_code, str(exc.detail),
                      getattr(exc, "headers", None))


def _chat_routes(app: FastAPI, gw: _Gateway, max_body_bytes: int) -> None:
    """Write a message, read a page of history: each answer names its shard (X-Shard)."""
    service, home_shard = gw.service, gw.home_shard

    @app.post("/channels/{channel}/messages", status_code=201, response_model=Posted,
              responses=ERRORS, summary="Append a message (acknowledged once committed)")
    async def post_message(channel: Channel, message: Annotated[MessageIn, Body()],
                           response: Response,
                           idempotency_key: Annotated[str | None, Header(
                               alias="Idempotency-Key", pattern=r"^[\x21-\x7e]{1,200}$",
                               description=(
                                   "A key of the client's for this write (1-200 visible "
                                   "ASCII characters, e.g. a UUID): a retry with the same "
                                   "key is stored once and answered with the first id, for "
                                   "24 h"))] = None) -> Posted:
        size = len(message.body.encode("utf-8", "surrogatepass"))
        if size > max_body_bytes:
            where = home_shard(channel)
            return _error(413, f"body must be at most {max_body_bytes} bytes (UTF-8), "
                               f"got {size}", {"X-Shard": where} if where else None
                          )  # type: ignore[return-value]
        result = await service().post(channel, message.user, message.body,
                                      idempotency_key=idempotency_key)
        response.headers["X-Shard"] = str(result.shard)
        return Posted(id=result.id, channel=channel, shard=result.shard)

    @app.get("/channels/{channel}/messages", response_model=Page, responses=ERRORS,
             summary="A page of history, newest first")
    async def read_messages(
            channel: Channel, response: Response,
            limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
            before: Annotated[int | None, Query(ge=1, le=MAX_ID,
                                                description="Only ids below this")] = None,
    ) -> Page:
        result = await service().read(channel, limit=limit, before=before)
        response.headers["X-Shard"] = _shard_header(result.shards)
        response.headers["X-Source"] = result.source
        messages = list(result.messages)
        next_before = messages[-1]["id"] if len(messages) == limit else None
        return Page(channel=channel, messages=messages, next_before=next_before)


def _operator_routes(app: FastAPI, gw: _Gateway, admin_only) -> None:
    """What an operator reads (/stats, /hotkeys, /health, /metrics) and the admin routes
    that switch mitigations at run time (``admin_only`` guards them)."""
    service, state = gw.service, gw.state

    @app.get("/stats", summary="Placement (partitioner, shard_count, key_type, layout), "
                               "per-shard counters, CPU, queue depth, latency")
    async def stats() -> dict[str, Any]:
        return _stats(service(), state)

    @app.get("/hotkeys", summary="Top channels over the sliding window (Space-Saving)",
             responses={422: {"model": ErrorOut}})
    async def hotkeys(k: Annotated[int, Query(ge=1, le=1000)] = 10) -> dict[str, Any]:
        svc = service()
        out = svc.hotkeys.top(k).to_dict()
        out["hot_share"] = svc.mitigations.hot_share
        return out

    @app.get("/health", summary="ok when every shard's primary is up (503 otherwise)",
             responses={503: {"description": "A shard is down or restarting"}})
    async def health() -> JSONResponse:
        workers = [w for w in service().supervisor.workers() if w.replica == 0]
        down = [w.shard for w in workers if not w.up]
        body = {"status": "degraded" if down else "ok", "shards": len(workers),
                "down": down}
        return JSONResponse(body, status_code=503 if down else 200)

    @app.get("/admin/mitigations", summary="What is switched on (admin token)",
             responses=ADMIN_ERRORS, dependencies=[Depends(admin_only)])
    async def get_mitigations() -> dict[str, Any]:
        return service().mitigations.to_dict(SERVICE_FIELDS)

    @app.post("/admin/mitigations", summary="Switch mitigations at run time (partial update; "
                                            "admin token, JSON body)",
              responses={**ERRORS, **ADMIN_ERRORS}, dependencies=[Depends(admin_only)],
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": MITIGATIONS_SCHEMA}}}})
    async def set_mitigations(request: Request) -> dict[str, Any]:
        # parsed here, not by a model, so that a malformed body gets the field-naming
        # messages of mitigations.updated (admin_only has checked the content type)
        from hotshard._http import loads_bounded

        try:
            changes = loads_bounded(await request.body() or b"null", limit=8)
        except (UnicodeDecodeError, ValueError) as e:
            raise InputError(f"body must be a JSON object of mitigation fields: {e}") from None
        svc = service()
        await svc.set_mitigations(updated(svc.mitigations, changes))
        return svc.mitigations.to_dict(SERVICE_FIELDS)

    @app.get("/metrics", summary="Prometheus text exposition", response_class=Response,
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def metrics() -> Response:
        from hotshard.service.metrics import render

        body, content_type = render(service(), state)
        return Response(body, media_type=content_type)


async def _sample_cpu(service: ChatService, state: dict[str, Any]) -> None:
    """CPU % of every worker (and the gateway itself) over the last second, from /proc."""
    meter = CpuMeter()
    while True:
        pids = [w.pid for w in service.supervisor.workers() if w.pid] + [os.getpid()]
        state["cpu"] = {pid: meter.sample(pid) for pid in pids}
        await asyncio.sleep(CPU_SAMPLE_S)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _stats(service: ChatService, state: dict[str, Any]) -> dict[str, Any]:
    """The /stats document: how channels are placed (``partitioner``, ``shard_count``,
    ``key_type``, ``layout``, ``live_slot_map``: ``Router.placement``), the service, then one
    entry per shard with its replicas (``shards``)."""
    cpu: dict[int, float | None] = state.get("cpu", {})
    by_shard: dict[int, list] = {}
    for w in service.supervisor.workers():
        by_shard.setdefault(w.shard, []).append(w)
    hop = LatencyHistogram()  # every shard's hop, merged
    shards = []
    for shard, workers in sorted(by_shard.items()):
        c = service.counters[shard]
        window = c.latency.snapshot()
        hop.merge(c.hop)
        processes = [{
            "replica": w.replica, "pid": w.pid, "up": w.up, "restarts": w.restarts,
            "cpu_percent": _round(cpu.get(w.pid)) if w.pid else None,
            "cpu_seconds": _round(process_cpu_seconds(w.pid)) if w.pid else None,
            "queue_depth": w.in_flight} for w in workers]
        primary = processes[0]
        shards.append({
            "id": shard, "pid": primary["pid"], "up": primary["up"],
            "requests": c.requests, "reads": c.reads, "writes": c.writes,
            "errors": c.errors, "unavailable": c.unavailable, "timeouts": c.timeouts,
            "cpu_percent": primary["cpu_percent"], "cpu_seconds": primary["cpu_seconds"],
            "queue_depth": sum(p["queue_depth"] for p in processes),
            "p50_ms": _ms(window.percentile(50)), "p99_ms": _ms(window.percentile(99)),
            "cache_hits": c.cache_hits, "coalesced": c.coalesced,
            "restarts": primary["restarts"], "replicas": processes[1:]})
    router = service.router
    return {
        **router.placement(),
        "service": {
            **router.describe(), "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - state.get("started", time.monotonic()), 3),
            "gateway_cpu_percent": _round(cpu.get(os.getpid())),
            "mitigations": service.mitigations.to_dict(SERVICE_FIELDS),
            # how it finds hot channels (``detect.policy``): what a model of it needs
            "detection": {"window_s": service.hotkeys.window_s,
                          "hot_share": service.mitigations.hot_share},
            "split_channels": len(service.splits),
            "hop_p50_ms": _ms(hop.percentile(50)),
            "hop_p99_ms": _ms(hop.percentile(99)),
            "latency_window_s": service.counters[0].latency.window_s if shards else None,
            "shard_timeout_s": service.shard_timeout_s,
            "cache": {"hits": service.cache.hits, "misses": service.cache.misses,
                      "entries": service.cache.size},
            "coalesced": service.coalescer.coalesced},
        "shards": shards,
        # what the mitigations did, oldest first (the newest MAX_ACTIONS): when (Unix
        # seconds), on which channel and shard, and the share that made it hot
        "actions": _actions(service)}


def _actions(service: ChatService) -> list[dict[str, Any]]:
    """The action log, the hot set read again first (a channel whose traffic stopped is
    lifted by now, not at the next request)."""
    service.refresh_hot()
    return list(service.actions)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)

