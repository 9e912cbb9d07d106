"""RESP2 to Redis nodes: the wire (``exchange``, ``encode_command``), a node's URL and login,
and one-off questions to a node (``ask``, ``ask_all``, ``aask_all``).

``RedisURL``/``parse_url`` carry the password in the URL or, when the URL gives none, in the
environment variable ``REDISCLI_AUTH``, as redis-cli takes it. Each question is bounded as a
whole by one deadline, whatever the peer does: a peer that never answers, or trickles bytes and
never ends its reply, costs ``timeout`` seconds and one line (``NodeUnreachable``), never a
hang; the asynchronous ones run on the event loop, so no thread is left behind for the
interpreter to wait for at exit. The cluster client is ``hotshard.cluster.client``; slot maps
are ``hotshard.cluster.topology``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from hotshard.errors import InputError, NodeLoading, NodeUnreachable, RespError

__all__ = ["DEFAULT_TIMEOUT", "PASSWORD_ENV", "TOO_MANY_REDIRECTS", "NodeLoading",
           "NodeUnreachable", "RedisURL", "RespError", "aask_all", "aexchange",
           "ask", "ask_all", "encode_command", "error_kind", "exchange", "node_key",
           "parse_info", "parse_url", "redact_url"]

TOO_MANY_REDIRECTS = "too many redirections (MOVED storm)"
PASSWORD_ENV = "REDISCLI_AUTH"  # redis-cli's: the password when the URL gives none
DEFAULT_TIMEOUT = 5.0  # seconds for one question to a node (connect, commands, replies)
MAX_REPLY_BYTES = 64 << 20  # a one-off question's replies (INFO of a node is ~10 KB)
PASSWORD_HINT = (f"give it in the environment variable {PASSWORD_ENV} (kept off command lines) "
                 "or in the URL, redis-cluster://:PASSWORD@HOST:PORT, as `hotshard cluster up` "
                 "printed it (`hotshard cluster status --data DIR` shows it again)")


def error_kind(error: str) -> str:
    """How a failure report names an error reply: ``redis`` and the reply's first word
    (``redis CLUSTERDOWN``, ``redis LOADING``, ``redis ERR``), which is Redis's own error
    code; too many redirections is named as the MOVED storm it is."""
    if error == TOO_MANY_REDIRECTS:
        return f"redis {error}"
    return "redis " + (error.split(None, 1) or ["error"])[0]


def encode_command(args: Sequence[Any]) -> bytes:
    """RESP array of bulk strings (a number is sent as its decimal text)."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        raw = a.encode() if isinstance(a, str) else a if isinstance(a, bytes) else \
            str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(parts)


class _Replies:
    """The replies of ``count`` commands, parsed as their bytes arrive (hiredis, text
    decoded); an error reply is a ``hiredis.ReplyError`` value, not raised."""

    def __init__(self, address: str, count: int) -> None:
        import hiredis

        self.address = address
        self.count = count
        self.reader = hiredis.Reader(encoding="utf-8", errors="replace")
        self.replies: list[Any] = []
        self.received = 0

    def feed(self, data: bytes) -> bool:
        """Take ``data``; whether every reply is complete."""
        if not data:
            raise NodeUnreachable(f"{self.address} closed the connection before its reply "
                                  "was complete: not a Redis server, or one shutting down")
        self.received += len(data)
        if self.received > MAX_REPLY_BYTES:
            raise NodeUnreachable(f"{self.address} sent more than {MAX_REPLY_BYTES >> 20} MiB "
                                  "without completing its reply: not a Redis server")
        self.reader.feed(data)
        while len(self.replies) < self.count:
            try:
                reply = self.reader.gets()
            except Exception:  # hiredis.ProtocolError
                raise NodeUnreachable(f"{self.address} is not a Redis server (its answer "
                                      "is not the Redis protocol)") from None
            if reply is False:
                return False
            self.replies.append(reply)
        return True


def _no_reply(address: str, timeout: float, connected: bool) -> NodeUnreachable:
    if not connected:
        return NodeUnreachable(f"cannot reach Redis at {address}: no connection within "
                               f"{timeout:g} s (a host that is down, or a firewall)")
    return NodeUnreachable(f"{address} accepted the connection but sent no complete reply "
                           f"within {timeout:g} s: not a Redis server, or a frozen one")


def _unreachable(address: str, error: OSError) -> NodeUnreachable:
    reason = "connection refused" if isinstance(error, ConnectionRefusedError) else \
        (error.strerror or str(error) or type(error).__name__)
    return NodeUnreachable(f"cannot reach Redis at {address}: {reason}")


def exchange(host: str, port: int, commands: Sequence[Sequence[Any]], *,
             timeout: float) -> list[Any]:
    """The replies to ``commands``, sent together on a new connection to ``host:port``.

    Connecting, sending and reading every reply share one deadline, ``timeout`` seconds
    from the call, whatever the peer does (silent, or sending a byte at a time and never
    ending its reply): each read waits only for what is left of it.

    Raises
    ------
    NodeUnreachable
        Refused, reset, closed, not RESP, or no complete reply within ``timeout``.
    """
    address = f"{host}:{port}"
    deadline = time.monotonic() + timeout
    replies = _Replies(address, len(commands))
    connected = False
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            connected = True
            sock.settimeout(max(1e-3, deadline - time.monotonic()))
            sock.sendall(b"".join(encode_command(c) for c in commands))
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)
                if replies.feed(sock.recv(65536)):
                    return replies.replies
    except TimeoutError:  # socket.timeout is TimeoutError
        raise _no_reply(address, timeout, connected) from None
    except OSError as e:
        raise _unreachable(address, e) from None


async def aexchange(host: str, port: int, commands: Sequence[Sequence[Any]], *,
                    timeout: float) -> list[Any]:
    """``exchange`` on the running event loop (no thread): the same replies, deadline and
    errors; the connection is closed however it ends, cancellation included."""
    address = f"{host}:{port}"
    replies = _Replies(address, len(commands))
    connected = False
    writer: asyncio.StreamWriter | None = None

    async def talk() -> list[Any]:
        nonlocal connected, writer
        reader, writer = await asyncio.open_connection(host, port)
        connected = True
        writer.write(b"".join(encode_command(c) for c in commands))
        while not replies.feed(await reader.read(65536)):
            pass
        return replies.replies

    try:
        return await asyncio.wait_for(talk(), timeout)
    except TimeoutError:
        raise _no_reply(address, timeout, connected) from None
    except OSError as e:
        raise _unreachable(address, e) from None
    finally:
        if writer is not None:
            writer.transport.abort()


def node_key(address: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port): the order nodes are numbered in."""
    h, _, p = address.rpartition(":")
    return h, int(p)


@dataclass(frozen=True)
class RedisURL:
    """A node to talk to and how to log in: ``redis[-cluster]://[[USER]:PASSWORD@]HOST[:PORT]``."""

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    scheme: str = "redis-cluster"
    password_from: str = field(default="url", repr=False, compare=False)  # or PASSWORD_ENV

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def at(self, address: str) -> RedisURL:
        """Another node of the same cluster, with the same credentials."""
        host, port = node_key(address)
        return replace(self, host=host or self.host, port=port)

    def __str__(self) -> str:
        return self._format(quote(self.password, safe="") if self.password is not None
                            else None)

    def redacted(self) -> str:
        """The URL without its password: for messages, logs and recorded results."""
        return self._format("***" if self.password is not None else None)

    def given(self) -> str:
        """The URL as the user gave it: with its password only if that was in the URL (one
        taken from the environment stays out of output)."""
        return str(self) if self.password_from == "url" else self._format(None)

    @property
    def password_origin(self) -> str:
        """Where the password came from, for messages: ``the URL`` or the variable's name."""
        return "the URL" if self.password_from == "url" else self.password_from

    def _format(self, password: str | None) -> str:
        user = quote(self.username or "", safe="")
        login = f"{user}:{password}@" if password is not None else f"{user}@" if user else ""
        return f"{self.scheme}://{login}{self.address}"


def parse_url(url: str | RedisURL, *, environ: Mapping[str, str] | None = None) -> RedisURL:
    """``redis://`` or ``redis-cluster://`` URL (or bare ``HOST:PORT``) -> RedisURL.

    The password may be given as ``:PASSWORD@`` or ``USER:PASSWORD@``, percent-encoded as in
    any URL; when the URL gives none, it is ``REDISCLI_AUTH`` from ``environ`` (default
    ``os.environ``; unset or empty: no password), as redis-cli does. The port defaults to
    6379.
    """
    if isinstance(url, RedisURL):
        return url
    parts = urlsplit(url if "://" in url else f"redis://{url}")
    if parts.scheme not in ("redis", "redis-cluster") or not parts.hostname:
        raise InputError("expected redis://HOST:PORT or redis-cluster://[:PASSWORD@]HOST:PORT, "
                         f"got {_redact_text(url)!r}")
    try:
        port = parts.port or 6379
    except ValueError:
        raise InputError(f"bad port in {_redact_text(url)!r}") from None
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    if password is None:
        password = (os.environ if environ is None else environ).get(PASSWORD_ENV) or None
        if password is not None:
            return RedisURL(parts.hostname, port, username, password, parts.scheme,
                            PASSWORD_ENV)
    return RedisURL(parts.hostname, port, username, password, parts.scheme)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (a URL that does not parse is returned
    with its login part cut), so a recorded target or a message never carries a secret."""
    try:
        return parse_url(url, environ={}).redacted()
    except InputError:
        return _redact_text(url)


def _redact_text(url: str) -> str:
    scheme, sep, rest = url.rpartition("://")
    login, at, host = rest.rpartition("@")
    return f"{scheme}{sep}***@{host}" if at else url


def _login(url: RedisURL) -> list[tuple[str, ...]]:
    """What a new connection sends first: AUTH with the URL's (or environment's) password."""
    if url.password is None:
        return []
    return [("AUTH", url.username, url.password) if url.username else ("AUTH", url.password)]


def _auth_error(url: RedisURL, text: str) -> InputError:
    where = url.password_origin
    if "without any password" in text or "no password is set" in text:
        fix = f"unset {where}" if url.password_from != "url" else "remove ':PASSWORD@' from it"
        return InputError(f"Redis at {url.address} has no password, but {where} gives one: "
                          f"{fix}")
    if url.password is None:
        return InputError(f"Redis at {url.address} needs a password (NOAUTH) and none was "
                          f"given: {PASSWORD_HINT}")
    return InputError(f"Redis at {url.address} refused the password in {where} (WRONGPASS): "
                      f"{PASSWORD_HINT}")


def _reply_error(url: RedisURL, command: Sequence[Any], text: str) -> InputError:
    """The InputError for an error reply to ``command``, named as Redis named it."""
    if text.startswith(("NOAUTH", "WRONGPASS")):
        return _auth_error(url, text)
    if text.startswith("LOADING"):
        return NodeLoading(f"Redis at {url.address} is loading its data (LOADING): wait for "
                           "it")
    if "cluster support disabled" in text:
        return InputError(f"{url.address} is a Redis server without cluster mode, not a "
                          "Redis Cluster node")
    return InputError(f"{url.address} answered {' '.join(map(str, command[:2]))} with an "
                      f"error: {text}")


def _checked(url: RedisURL, commands: Sequence[Sequence[Any]], replies: list[Any],
             keep_errors: bool = False) -> list[Any]:
    """The replies to ``commands`` (the login's come first): any error reply raised, or with
    ``keep_errors`` returned in its place as the InputError it would raise (a login's error
    is always raised)."""
    import hiredis

    hello = len(replies) - len(commands)
    for reply in replies[:hello]:
        if isinstance(reply, hiredis.ReplyError):
            raise _auth_error(url, str(reply))
    out = replies[hello:]
    for i, (command, reply) in enumerate(zip(commands, out, strict=True)):
        if isinstance(reply, hiredis.ReplyError):
            if not keep_errors:
                raise _reply_error(url, command, str(reply))
            out[i] = _reply_error(url, command, str(reply))
    return out


def ask_all(url: RedisURL, commands: Sequence[Sequence[Any]], *,
            timeout: float = DEFAULT_TIMEOUT, keep_errors: bool = False) -> list[Any]:
    """The replies to ``commands``, sent after the login on one new connection to the URL's
    node; the whole exchange is bounded by ``timeout`` whatever the node does. With
    ``keep_errors`` an error reply is returned in its place (as an InputError) instead of
    raised: for a batch where one key may be gone by the time it is asked about.

    Raises
    ------
    InputError
        NodeUnreachable when the node is not there, silent, too slow or not Redis; a
        missing or refused password, LOADING, or any other error reply, naming the node.
    """
    replies = exchange(url.host, url.port, [*_login(url), *commands], timeout=timeout)
    return _checked(url, commands, replies, keep_errors)


async def aask_all(url: RedisURL, commands: Sequence[Sequence[Any]], *,
                   timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    """``ask_all`` on the running event loop (no thread)."""
    replies = await aexchange(url.host, url.port, [*_login(url), *commands], timeout=timeout)
    return _checked(url, commands, replies)


def ask(url: RedisURL, *command: Any, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """The reply to one command (see ``ask_all``)."""
    return ask_all(url, [command], timeout=timeout)[0]


def parse_info(text: str) -> dict[str, Any]:
    """INFO's ``key:value`` lines -> dict; the ``dbN`` and ``cmdstat_*`` lines' ``a=1,b=2``
    values -> dicts of numbers (as redis-py parses them)."""
    out: dict[str, Any] = {}
    for line in str(text).splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        if key.startswith(("db", "cmdstat_")) and "=" in value:
            fields = {}
            for pair in value.split(","):
                name, _, number = pair.partition("=")
                try:
                    fields[name] = int(number)
                except ValueError:
                    with contextlib.suppress(ValueError):
                        fields[name] = float(number)
            out[key] = fields
        else:
            out[key] = value
    return out
