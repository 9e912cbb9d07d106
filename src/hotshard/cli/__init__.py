"""The ``hotshard`` command: one subcommand per capability, each a thin shell over the library.

Only this package prints for the user or exits. A user mistake (``HotshardError`` or a bad
option) becomes one line ``hotshard: error: ...`` and exit status 2, never a traceback.
Each command group lives in its own module, imported only when its command runs (pip's
``commands/__init__.py`` does the same), so ``hotshard --help`` pays for nothing else.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys

import click

from hotshard import __version__
from hotshard.errors import HotshardError

__all__ = ["cli", "main"]

# command name -> (module, function, one-line summary shown by `hotshard --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "fit": ("hotshard.cli.fit", "fit",
            "Fit a discrete power law to a tail of counts (CSN 2009)."),
    "profile": ("hotshard.cli.profile", "profile",
                "Count requests per key into a privacy-safe profile."),
    "inspect": ("hotshard.cli.profile", "inspect",
                "Summarise a profile: hot keys' shares, tail fit, warnings."),
    "generate": ("hotshard.cli.generate", "generate",
                 "Synthetic chat messages from a profile or a classic law."),
    "shard": ("hotshard.cli.shards", "shard",
              "Each key's shard (slot, token, hash) as the store places it."),
    "predict": ("hotshard.cli.shards", "predict",
                "Each shard's share of load (and CPU) from a profile."),
    "simulate": ("hotshard.cli.sim", "simulate",
                 "Queueing model of the sharded service: per-shard CPU and latency."),
    "serve": ("hotshard.cli.serve", "serve",
              "The reference sharded chat-history service (HTTP)."),
    "cluster": ("hotshard.cli.cluster", "cluster",
                "A local Redis Cluster: up, status, down."),
    "drive": ("hotshard.cli.drive", "drive",
              "Open-loop load (HTTP, Redis Cluster), honest latency."),
    "observe": ("hotshard.cli.observe", "observe",
                "Observations from Prometheus, a Redis Cluster, k6, Locust or a dashboard CSV."),
    "diagnose": ("hotshard.cli.diagnose", "diagnose",
                 "Rank the explanations of a test that missed production."),
    "report": ("hotshard.cli.report", "report", "One offline HTML report: plots and diagnosis."),
    "check": ("hotshard.cli.check", "check",
              "CI gate: would a load test's keys hide a hot key or shard?"),
    "diff": ("hotshard.cli.diff", "diff", "How production's hot spots moved between two profiles."),
    "demo": ("hotshard.cli.demo", "demo",
             "The whole story on embedded defaults (no files needed)."),
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use; the listing needs no import."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[cmd_name]
        return _in_its_own_words(getattr(importlib.import_module(module), attr))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, summary) for name, (_, _, summary) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _in_its_own_words(command: click.Command) -> click.Command:
    """The command, its library errors worded with its flags: a parameter a message names
    (``${rate}``) is given the flag that set it (``--rps``) while the command's context is
    still current (``_options.flag_names``). Applied once, to its modes and subcommands too."""
    if getattr(command, "_in_its_own_words", False):
        return command
    command._in_its_own_words = True   # type: ignore[attr-defined]
    callback = command.callback
    if callback is not None:
        import functools

        @functools.wraps(callback)
        def run(*args, **kwargs):
            try:
                return callback(*args, **kwargs)
            except HotshardError as exc:
                if exc.parameters and not hasattr(exc, "flags"):
                    from hotshard.cli._options import flag_names

                    exc.flags = flag_names(click.get_current_context())  # type: ignore
                raise

        command.callback = run
    for sub in getattr(command, "commands", {}).values():
        _in_its_own_words(sub)
    return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hotshard")
def cli() -> None:
    """hotshard: make load tests of partitioned stores tell the truth about hot keys.

    Uniform synthetic keys spread load perfectly over every shard, so a load test built on them
    measures a system that cannot occur in production, where a few keys carry much of the
    traffic and one shard runs hot. hotshard profiles the real key distribution (counts only),
    fits its tail, and drives tests and predictions from it.
    """


# click >= 8.2 raises this for a bare `hotshard` when not in standalone mode
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C so atomic writers remove their temporary files."""


# the SIGTERM of this run, once one arrived: an engine may turn the exception the handler
# raised into its own, and the run still ends as terminated, not with that error
_SIGNALLED: list[BaseException] = []


# how long a SIGTERM may take to end the run by its exception: one raised inside a C
# callback (numba loading a compiled function, say) is printed and dropped by Python, and
# the run would go on; past this the process ends itself, its partial outputs removed
TERM_GRACE_S = 10.0


# the armed watchdog of this run (``_on_sigterm``), cancelled when the run ends by itself
_WATCHDOG: list = []


def _on_sigterm(signum, frame) -> None:
    exc = Terminated()
    if not _WATCHDOG:
        import threading

        watchdog = threading.Timer(TERM_GRACE_S, _end_now)
        watchdog.daemon = True
        watchdog.start()
        _WATCHDOG.append(watchdog)
    _SIGNALLED.append(exc)
    raise exc


def _disarm() -> None:
    """The run ended by itself (its SIGTERM seen): no forced end."""
    for watchdog in _WATCHDOG:
        watchdog.cancel()
    _WATCHDOG.clear()


def _end_now() -> None:
    """The run outlived its SIGTERM (module notes): partial outputs removed, one line, 143."""
    from hotshard._atomic import remove_in_progress

    remove_in_progress()
    with contextlib.suppress(OSError):
        os.write(2, b"hotshard: terminated (files being written were removed)\n")
    os._exit(143)


def _engine_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is DuckDB's word for a query a signal interrupted: it runs Python's
    handler inside the query, keeps the handler's exception (KeyboardInterrupt for Ctrl-C)
    to itself and raises "Query interrupted" (a wrapper may have put that in a one-line
    error). Nothing else here interrupts a query but on the way out of an error already
    raised, which is then the one reported."""
    text = str(exc)
    return isinstance(exc, RuntimeError | HotshardError) and (
        text == "Query interrupted" or text.endswith(": Query interrupted"))


def _interruption(exc: BaseException, signalled: list[BaseException] | None = None
                  ) -> BaseException | None:
    """The Ctrl-C or SIGTERM an exception was raised in the handling of, if any: in its
    chain of causes; else the SIGTERM ``signalled`` (this run's handler) recorded; else
    Ctrl-C when an engine reports a query interrupted."""
    seen = set()
    cause: BaseException | None = exc
    engine = False
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, KeyboardInterrupt | Terminated):
            return cause
        engine = engine or _engine_interrupted(cause)
        cause = cause.__cause__ or cause.__context__
    if signalled:
        return signalled[0]
    return KeyboardInterrupt() if engine else None


def _forget_unhandled_interrupt() -> None:
    """Keep the exit status this run chose. CPython (3.11-3.13) notes a KeyboardInterrupt
    that leaves code run by ``exec`` of a string (every dataclass's generated methods) in
    a process-wide flag, and when the flag is set at exit it kills itself with SIGINT,
    whatever status ``sys.exit`` was given: a Ctrl-C that lands while a dataclass is being
    built, handled here as exit 130 (or an error line), ended as "killed by SIGINT". An
    ``exec`` that completes clears the flag."""
    exec("", {})  # noqa: S102 - an empty program: only its side effect on the flag


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning user mistakes into one line and exit status 2."""
    previous = {}
    with contextlib.suppress(ValueError):  # not the main thread (embedded): leave signals be
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _on_sigterm)
        _SIGNALLED.clear()   # this run's handler: what it records is this run's
    try:
        # make_context + invoke, not cli.main: main() turns a broken pipe into exit 1 itself
        args = sys.argv[1:] if argv is None else list(argv)
        with cli.make_context("hotshard", args) as ctx:
            rv = cli.invoke(ctx)
    except click.exceptions.Exit as exc:  # --help, --version, and `Exit(1)` of generate verify
        return exc.exit_code
    except BaseException as exc:
        status = _exit_status(exc, _SIGNALLED if previous else None)
        if status is None:
            raise
        _forget_unhandled_interrupt()
        return status
    finally:
        _disarm()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return rv if isinstance(rv, int) else 0


# an error line's foreign text (a server's words, a key from a file) is kept to this much
MAX_ERROR_CHARS = 600


def _line(text: str) -> str:
    """An error as one terminal line: control and bidi characters escaped (a server's text
    or a key can hold ESC sequences, CR/LF that forge lines, overrides), cut to
    ``MAX_ERROR_CHARS``."""
    from hotshard._format import safe_text

    return safe_text(text, MAX_ERROR_CHARS)


def _disk_full(exc: BaseException) -> str | None:
    """`` while writing PATH`` (or "") when ``exc`` is, or was raised in the handling of, a
    full disk or quota (ENOSPC, EDQUOT); else None."""
    import errno

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            where = exc.filename
            return f" while writing {_line(str(where))}" if where else ""
        if "database or disk is full" in str(exc) or "No space left on device" in str(exc):
            return ""
        exc = exc.__cause__ or exc.__context__
    return None


def _exit_status(exc: BaseException, signalled: list[BaseException] | None = None
                 ) -> int | None:
    """The exit status of a run that raised ``exc``, its line said; None: not ours to
    handle (a bug: its traceback is wanted). ``signalled``: the SIGTERM this run's own
    handler recorded (None when it installed none: embedded in a thread)."""
    interruption = _interruption(exc, signalled)
    if interruption is not None or isinstance(exc, click.exceptions.Abort):
        # Ctrl-C or SIGTERM, also when an engine raised its own error on the way out
        if isinstance(interruption, Terminated):
            click.echo("hotshard: terminated (files being written were removed)", err=True)
            return 143
        click.echo("hotshard: interrupted (files being written were removed)", err=True)
        return 130
    if isinstance(exc, HotshardError):
        worded = exc.worded(getattr(exc, "flags", None))
        click.echo(f"hotshard: error: {_line(worded)}", err=True)
        return 2
    full = _disk_full(exc)
    if full is not None:   # the temporary output was removed on the way out (_atomic)
        click.echo(f"hotshard: error: no space left on the device{full}: free some, or write "
                   "elsewhere (nothing partial was kept)", err=True)
        return 2
    if isinstance(exc, _NO_ARGS_IS_HELP):
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 2
    if isinstance(exc, click.UsageError):
        hint = f" (see 'hotshard {exc.ctx.command_path.split(' ', 1)[1]} --help')" if (
            exc.ctx and " " in exc.ctx.command_path) else " (see 'hotshard --help')"
        message = " ".join(exc.format_message().split())  # click's choice lists span lines
        click.echo(f"hotshard: error: {_line(message)}{hint}", err=True)
        return 2
    if isinstance(exc, click.ClickException):
        click.echo(f"hotshard: error: {exc.format_message()}", err=True)
        return 2
    if isinstance(exc, BrokenPipeError):  # the reader went away (| head): not an error
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return None
