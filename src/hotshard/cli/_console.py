"""What the command line shows besides results: notes, progress bars, JSON files."""

from __future__ import annotations

import json
import sys

import click


def _safe(message: str) -> str:
    """A note or warning may quote foreign text (a key, a server's words): escaped for the
    terminal, cut at 2,000 characters."""
    from hotshard._format import safe_text

    return safe_text(message, 2000)


def _fitted(text: str) -> str:
    """``text`` wrapped to the terminal (at most 100 columns, continuation lines indented)
    when stderr is one; as one line elsewhere, so a log keeps one line per remark."""
    if not sys.stderr.isatty():
        return text
    import shutil
    import textwrap

    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent="    ")) or text


def in_flags(message: str) -> str:
    """A library's ``Phrase`` with its parameters named by the running command's flags
    (``_options.flag_names``); any other text as it is."""
    from hotshard.errors import Phrase

    ctx = click.get_current_context(silent=True)
    if not isinstance(message, Phrase) or ctx is None:
        return message
    from hotshard.cli._options import flag_names

    return message.worded(flag_names(ctx))


def note(message: str) -> None:
    """A remark on stderr that does not stop the command (one line, wrapped on a terminal)."""
    click.echo(_fitted(f"hotshard: note: {_safe(in_flags(message))}"), err=True)


def warn(message: str) -> None:
    """A warning on stderr: the command went on, but the user should look (one line, wrapped
    on a terminal)."""
    click.echo(_fitted(f"hotshard: warning: {_safe(in_flags(message))}"), err=True)


def write_json(path: str, payload: dict) -> None:
    """Write ``payload`` as indented JSON, atomically."""
    from hotshard._atomic import atomic_write

    with atomic_write(path) as handle:
        json.dump(payload, handle, indent=2)
        handle.write("\n")


SLOW_AFTER_S = 5.0


def interruptible(work, slow_note: str | None = None):
    """``work()`` in a daemon thread, the main thread waiting in short joins: a long compiled
    loop (numba holds the thread) would otherwise keep Ctrl-C and SIGTERM from being handled.
    ``slow_note`` is shown once if the work takes longer than ``SLOW_AFTER_S`` seconds."""
    from hotshard._threads import run_in_thread

    pending = [slow_note]

    def tick(elapsed: float) -> None:
        if pending[0] and elapsed > SLOW_AFTER_S:
            note(pending[0])
            pending[0] = None

    return run_in_thread(work, tick)


# Not on a terminal (a CI log, a pipe), progress is a plain line at most this often: a
# command shorter than this prints none, a long one shows it is alive and how far it got.
PLAIN_EVERY_S = 5.0


class ProgressBar:
    """Progress on stderr: a rich bar on a terminal; elsewhere (CI logs, pipes) a plain line
    ``hotshard: progress: STAGE 42% (30 s)`` at most every ``PLAIN_EVERY_S`` seconds. ``clock``
    is passed in (``time.monotonic``) so tests need not wait."""

    def __init__(self, enabled: bool, *, tty: bool | None = None, clock=None,
                 every_s: float = PLAIN_EVERY_S):
        import time

        tty = sys.stderr.isatty() if tty is None else tty
        self.enabled = enabled and tty
        self.plain = enabled and not tty
        self._clock = clock or time.monotonic
        self._every = every_s
        self._start = self._last = self._clock()
        self._bar = None
        self._tasks: dict[str, int] = {}

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
            self._bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def __call__(self, stage: str, fraction: float | None) -> None:
        if self.plain:
            now = self._clock()
            if now - self._last >= self._every:
                self._last = now
                done = f" {100 * fraction:.0f}%" if fraction is not None else ""
                click.echo(f"hotshard: progress: {stage}{done} "
                           f"({now - self._start:.0f} s)", err=True)
            return
        if self._bar is None:
            return
        if stage not in self._tasks:   # a stage with no fraction pulses: it is under way
            self._tasks[stage] = self._bar.add_task(
                stage, total=None if fraction is None else 1.0)
        if fraction is not None:
            self._bar.update(self._tasks[stage], completed=fraction)

    @property
    def callback(self):
        return self if self.enabled or self.plain else None


class RowsBar:
    """Rows-written progress bar on stderr (terminal only)."""

    def __init__(self, enabled: bool, total: int):
        self.inner = ProgressBar(enabled)
        self.total = total
        self.done = 0

    def __enter__(self):
        self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        self.inner.__exit__(*exc)

    def __call__(self, rows: int) -> None:
        self.done += rows
        self.inner("generating messages", self.done / self.total)
