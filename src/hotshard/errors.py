"""The one error hierarchy of hotshard: every exception class the package defines is here.

Every user mistake (missing file, bad value, malformed input) raises a ``HotshardError`` (a
library caller may also meet Python's own errors for a wrong argument type); the CLI
turns it into one line ``hotshard: error: ...`` and exit status 2. Subclasses also inherit the
nearest builtin so library callers can catch them the usual way (``except ValueError`` around a
profile load, ``except ConnectionError`` around a request).

Why one module: a caller looking for what to catch reads one file, and the test
``tests/test_errors.py`` fails when a module defines an exception class of its own. The modules
that raise these still re-export them (``hotshard.service.supervisor.ShardError``), so old
imports keep working. Control-flow signals that are not errors (the CLI's ``Terminated``,
``serve``'s ``LoadInterrupted``: a Ctrl-C that must unwind like one) stay where they are raised.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "FetchError", "Phrase", "FitError", "HeaderLineError", "HotshardError", "IdempotencyConflict",
    "InputError", "LoadError",
    "NodeLoading", "NodeUnreachable", "ObservationsError", "ProfileError", "ProtocolError",
    "RespError", "ShardError", "ShardFailure", "ShardTimeout", "ShardUnavailable",
    "TransportError",
]


# a parameter named in a message: ``${rate} must be > 0``
_PARAMETER = re.compile(r"\$\{([a-z_][a-z0-9_]*)\}")


def _worded(template: str, names: Mapping[str, str] | None) -> str:
    names = names or {}
    return _PARAMETER.sub(lambda m: names.get(m.group(1), m.group(1)), template)


class Phrase(str):
    """A note or warning for a person that names parameters as ``${name}``, as an error's
    message does (``HotshardError``): as a string it names them by their own names; the CLI
    words it with its flags (``worded``)."""

    template: str

    def __new__(cls, template: str) -> Phrase:
        phrase = super().__new__(cls, _worded(template, None))
        phrase.template = template
        return phrase

    def worded(self, names: Mapping[str, str] | None = None) -> str:
        return _worded(self.template, names)


class HotshardError(Exception):
    """Base of every error hotshard raises on purpose; the message says what to do.

    A message names the parameters it is about as ``${name}``, a library argument's name
    (``${rate} must be > 0, got -1``), never a command-line flag: a library caller reads
    ``rate must be > 0``, and the CLI words it with the flag of the command that ran
    (``--rps must be > 0``) through ``worded``, mapping a parameter to its flag in one place
    (``cli._options.flag_names``) instead of editing messages (click's ``param_hint``)."""

    def __str__(self) -> str:
        return self.worded()

    @property
    def parameters(self) -> tuple[str, ...]:
        """The parameters the message names, in order."""
        return tuple(_PARAMETER.findall(super().__str__()))

    @property
    def template(self) -> str:
        """The message with its parameters still named ``${name}``: what a wrapping error
        quotes (``f"{path}: {exc.template}"``), so the CLI can still word them."""
        return super().__str__()

    def worded(self, names: Mapping[str, str] | None = None) -> str:
        """The message with each named parameter as ``names`` calls it (a flag), else by
        its own name."""
        return _worded(super().__str__(), names)


# -- input: files, documents, arguments ---------------------------------------------------------

class InputError(HotshardError, ValueError):
    """Input data or an argument is missing, malformed or out of range."""


class HeaderLineError(InputError):
    """A plain list of numbers was expected, but line 1 is a table's header.

    ``columns`` are the header's column names: read one of them as a table column.
    """

    def __init__(self, message: str, columns: list[str]):
        super().__init__(message)
        self.columns = columns


class FitError(HotshardError, ValueError):
    """The data cannot support the requested fit (too few tail points, all values equal...)."""


class ProfileError(HotshardError, ValueError):
    """A profile file is malformed or inconsistent; the message names the field."""


class ObservationsError(HotshardError, ValueError):
    """An observations document is malformed; the message names the field path and the rule."""


# -- the reference service ----------------------------------------------------------------------

class ShardFailure(HotshardError, RuntimeError):
    """A request a shard did not carry out (the gateway's 5xx): ``shard`` says which, when
    known (the ``X-Shard`` of the answer); ``outcome_unknown``, whether it may have been
    carried out all the same (a write handed over before the failure)."""

    outcome_unknown = False

    def __init__(self, message: str, *, shard: int | None = None) -> None:
        super().__init__(message)
        self.shard = shard


class ShardUnavailable(ShardFailure, ConnectionError):
    """A shard's worker is down or restarting; try again after ``retry_after`` seconds.
    ``outcome_unknown``: the request had been handed to the shard when its connection broke,
    so a write may have been stored (retried blindly, it could be stored twice)."""

    def __init__(self, message: str, *, retry_after: float = 1.0,
                 shard: int | None = None, outcome_unknown: bool = False) -> None:
        super().__init__(message, shard=shard)
        self.retry_after = retry_after
        self.outcome_unknown = outcome_unknown


class ShardTimeout(ShardFailure, TimeoutError):
    """A shard did not answer in time (a frozen or overloaded worker): the gateway's 504.
    The request was handed to the shard, which may still carry it out: a write's outcome is
    unknown."""

    outcome_unknown = True


class ShardError(ShardFailure, RuntimeError):
    """A shard failed a request for a reason that is not the client's (storage, a bug)."""


class ProtocolError(HotshardError, ValueError):
    """A gateway <-> shard frame that is not what the protocol says (never a user's mistake:
    a bug or a crash). A ``ValueError`` like the malformed JSON it usually wraps, so a reader
    that drops a connection on a bad value drops it on a bad frame too."""


class LoadError(HotshardError, RuntimeError):
    """A load failed part-way for a reason that is not the file's (a worker died, the disk
    filled); the message says what is in the store now."""


# -- talking to a store: the driver's requests, Redis Cluster -----------------------------------

class TransportError(HotshardError, ConnectionError):
    """A request failed (refused, reset, timed out, an error reply); ``kind`` names it, and
    ``shard`` is the shard or node it was sent to when the target knows (a Redis Cluster
    always does), so a frozen node's timeouts land in that node's row. A run's failure table
    counts ``kind``; the message adds the shard, as ``RespError``'s adds the node."""

    def __init__(self, kind: str, shard: str | None = None) -> None:
        super().__init__(kind if shard is None else f"{kind} ({shard})")
        self.kind = kind
        self.shard = shard


class RespError(HotshardError, ConnectionError):
    """A command failed below Redis (refused, reset, timed out, not RESP) or could not log
    in; ``kind`` names it, ``node`` is the node the command was sent to."""

    def __init__(self, kind: str, node: str | None = None) -> None:
        super().__init__(kind if node is None else f"{kind} ({node})")
        self.kind = kind
        self.node = node


class FetchError(InputError):
    """A server hotshard reads evidence from could not be read within the bounds
    (``_http.fetch``). ``kind``: unreachable, deadline, size, redirect or protocol;
    ``reason``: the cause alone, for a caller that words the message itself."""

    def __init__(self, message: str, kind: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason or message


class IdempotencyConflict(InputError):
    """A write's idempotency key was used for another message (another channel, user or
    body): not a retry. The gateway's 409."""


class NodeUnreachable(InputError):
    """A node did not answer as a Redis server does: refused, reset, silent, too slow, or
    not RESP."""


class NodeLoading(InputError):
    """A node answered LOADING: it is reading its data set into memory."""
