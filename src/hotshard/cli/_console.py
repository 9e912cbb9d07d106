"""What the command line shows besides results: notes, progress bars, JSON files."""

from __future__ import annotations

import json
import sys

import click


def note(message: str) -> None:
    """A one-line remark on stderr that does not stop the command."""
    click.echo(f"hotshard: note: {message}", err=True)


def warn(message: str) -> None:
    """A one-line warning on stderr: the command went on, but the user should look."""
    click.echo(f"hotshard: warning: {message}", err=True)


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


class ProgressBar:
    """A rich progress bar on stderr, shown only on a terminal and when enabled."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
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
        if self._bar is None:
            return
        if stage not in self._tasks:
            self._tasks[stage] = self._bar.add_task(stage, total=1.0)
        if fraction is not None:
            self._bar.update(self._tasks[stage], completed=fraction)

    @property
    def callback(self):
        return self if self.enabled else None


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
