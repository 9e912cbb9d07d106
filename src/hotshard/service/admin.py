"""Who may change the service's configuration: the admin routes are closed by default.

``POST /admin/mitigations`` starts processes (replicas) and makes permanent changes (a split is
one-way), so a request to it must prove it comes from the operator, not from a web page the
operator happens to visit. A browser lets any page send a "simple" cross-origin POST (text/plain,
no preflight) to ``localhost``, and DNS rebinding lets a page reach it under its own host name.
So every admin request must

1. name this service in ``Host`` (``127.0.0.1:PORT``, ``localhost:PORT``, the bound host, or
   the address the connection arrived on; for a wildcard bind such as ``0.0.0.0`` or ``::``,
   also the machine's host names and any IP address of this machine): a rebound name such as
   ``evil.example:8080`` is refused (403). An IP literal cannot be rebound (DNS rebinding needs
   a name the attacker controls), so accepting the machine's own addresses opens nothing;
   addresses are compared in one form (``[::ffff:192.0.2.2]``, how a dual-stack ``::`` socket
   reports an IPv4 connection, is ``192.0.2.2``);
2. carry no ``Origin``, or this service's own (``http://`` + one of those): a page of another
   origin is refused (403) before anything else is looked at;
3. carry ``Authorization: Bearer TOKEN`` with the service's admin token (401 otherwise,
   compared in constant time); the token is generated at start (``new_admin_token``) unless
   the operator gives one, and a page cannot know it;
4. send JSON (``Content-Type: application/json``; 415 otherwise), which no page can send
   cross-origin without a CORS preflight that this service never grants.

The chat API (read and write messages), /stats, /hotkeys and /metrics stay open: they are the
system under test, driven by load generators from anywhere the service listens.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hotshard.errors import InputError

__all__ = ["ADMIN_TOKEN_ENV", "AdminGuard", "Refusal", "check_admin_token", "is_local_address",
           "is_loopback", "is_wildcard", "local_authority", "new_admin_token", "service_names"]

ADMIN_TOKEN_ENV = "HOTSHARD_ADMIN_TOKEN"
MIN_TOKEN_CHARS = 16
# RFC 6750's b64token: what may follow "Bearer " in a header without quoting
_TOKEN = re.compile(r"^[A-Za-z0-9._~+/-]+=*$")
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def new_admin_token() -> str:
    """A fresh random token (256 bits, URL-safe): generated at every start unless given."""
    return secrets.token_urlsafe(32)


def check_admin_token(token: object) -> str:
    """``token`` if it can serve as the admin token, else InputError naming the rule."""
    if not isinstance(token, str):
        raise InputError(f"${{admin_token}} must be a string, got {type(token).__name__}")
    if len(token) < MIN_TOKEN_CHARS:
        raise InputError(f"${{admin_token}} must be at least {MIN_TOKEN_CHARS} characters, got "
                         f"{len(token)}: a short token can be guessed")
    if not _TOKEN.match(token):
        raise InputError("${admin_token} may hold only letters, digits and . _ ~ + / - (then "
                         "= padding): it is sent in an HTTP header")
    return token


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches this machine only (127.0.0.0/8, ::1, a name that
    resolves only there)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback
                               for i in infos)


def is_wildcard(host: str) -> bool:
    """Whether listening on ``host`` listens on every address of the machine (0.0.0.0, ::)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address in one form (brackets and an IPv6 zone dropped, an
    IPv4-mapped IPv6 address as the IPv4 one), or None for a name."""
    try:
        ip = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _host_form(host: str) -> str:
    """A host as authorities compare it: lower case; an IP address in its one form, IPv6 in
    brackets."""
    ip = _ip(host)
    if ip is None:
        return host.lower()
    return f"[{ip}]" if ip.version == 6 else str(ip)


def _authority(host: str, port: int) -> str:
    return f"{_host_form(host)}:{port}"


def is_local_address(host: str) -> bool:
    """Whether ``host`` is an IP address of this machine (one a socket can bind to), asked
    of the kernel at each call, so an address gained or lost while serving is seen."""
    ip = _ip(host)
    if ip is None or ip.is_unspecified or ip.is_multicast:
        return False
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(ip), 0))
    except OSError:
        return False
    return True


def service_names(host: str, port: int) -> frozenset[str]:
    """The ``host:port`` authorities that name a service bound to ``host:port``: the loopback
    names, the bound host itself and, for a wildcard bind (0.0.0.0, ::), this machine's
    host names (its addresses are checked per request: ``AdminGuard.any_local_port``)."""
    names = {*_LOOPBACK_NAMES, host}
    if is_wildcard(host):
        names |= {socket.gethostname(), socket.getfqdn()}
    return frozenset(_authority(n, port) for n in names if n)


def _normalized(value: str, default_port: int) -> str | None:
    """A Host header or an origin's authority as ``host:port`` (port 80 when absent)."""
    value = value.strip().lower()
    if not value or any(c in value for c in "/?#@ \t"):
        return None
    if value.startswith("["):
        host, _, rest = value.partition("]")
        host += "]"
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = value.partition(":")
    if not host or (port and not port.isdigit()):
        return None
    return _authority(host, int(port) if port else default_port)


@dataclass(frozen=True)
class Refusal:
    """Why an admin request is refused: the HTTP status and a one-line reason."""

    status: int
    message: str
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True)
class AdminGuard:
    """The checks of an admin request (see the module's docstring), over its headers.

    Parameters
    ----------
    token : the admin token (``check_admin_token`` rules).
    names : authorities that name this service (``service_names``).
    any_local_port : for a service bound to a wildcard address on this port, also accept any
        IP address of this machine on it (``is_local_address``), whichever address the
        connection arrived on (e.g. ``Host: 192.0.2.2:PORT`` sent over loopback, or through
        another interface); None: only ``names`` and the arrival address.
    """

    token: str
    names: frozenset[str]
    any_local_port: int | None = None

    def __post_init__(self) -> None:
        check_admin_token(self.token)

    @classmethod
    def for_bind(cls, token: str, host: str, port: int) -> AdminGuard:
        """The guard of a service listening on ``host:port``: ``service_names``, and for a
        wildcard bind any address of this machine on ``port``."""
        return cls(token, service_names(host, port),
                   any_local_port=port if is_wildcard(host) else None)

    def refusal(self, headers: Mapping[str, str], method: str, *,
                arrived_on: Iterable[str] = ()) -> Refusal | None:
        """None when the request may pass, else why not. ``headers`` are case-insensitive
        (Starlette's); ``arrived_on``: authorities of the local address the connection came
        in on (how a service listening on 0.0.0.0 is named by its clients)."""
        names = self.names | frozenset(_authority(*_split(a)) for a in arrived_on)
        if not self._names_us(_normalized(headers.get("host", ""), 80), names):
            return Refusal(403, f"Host {headers.get('host', '')!r} does not name this "
                                "service: admin requests must be addressed to it directly "
                                f"(e.g. {sorted(self.names)[0]})")
        origin = headers.get("origin")
        if origin is not None:
            scheme, sep, rest = origin.strip().partition("://")
            if not sep or scheme.lower() != "http" or \
                    not self._names_us(_normalized(rest, 80), names):
                return Refusal(403, f"Origin {origin!r} is not this service: admin requests "
                                    "from other origins are refused")
        scheme, _, given = headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), self.token.encode()):
            return Refusal(401, "admin requests need the service's admin token: send "
                                "Authorization: Bearer TOKEN (hotshard serve prints it at "
                                "start)", {"WWW-Authenticate": "Bearer"})
        if method not in ("GET", "HEAD", "OPTIONS"):
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                return Refusal(415, f"admin requests must send JSON (Content-Type: "
                                    f"application/json), got {media or 'no content type'!r}")
        return None


    def _names_us(self, authority: str | None, names: frozenset[str]) -> bool:
        """Whether a normalized ``host:port`` names this service."""
        if authority is None:
            return False
        if authority in names:
            return True
        if self.any_local_port is None:
            return False
        host, port = _split(authority)
        return port == self.any_local_port and is_local_address(host)


def _split(authority: str) -> tuple[str, int]:
    """``host:port`` (as ``_authority`` writes it) as (host, port)."""
    host, _, port = authority.rpartition(":")
    return host, int(port)


def local_authority(server: tuple[str, int] | None) -> tuple[str, ...]:
    """The authority of the local address a connection arrived on (ASGI ``scope["server"]``,
    as uvicorn gives it: the accepted socket's own address, IPv4-mapped on a dual-stack
    socket), in the form ``AdminGuard`` compares."""
    if not server or server[1] is None:
        return ()
    return (_authority(str(server[0]), int(server[1])),)
