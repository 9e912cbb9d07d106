"""A Ctrl-C or SIGTERM inside a compiled kernel ends like any other: one line, 130 or 143."""

from __future__ import annotations

import contextlib
import signal
import sys

import pytest

from hotshard import cli as cli_module


@pytest.mark.parametrize("signal_exc,code,word", [
    (KeyboardInterrupt(), 130, "interrupted"),
    (cli_module.Terminated(), 143, "terminated"),
])
def test_a_signal_inside_a_compiled_kernel_is_an_interrupt(monkeypatch, capsys, signal_exc,
                                                          code, word):
    def kernel_interrupted(ctx):
        try:
            raise signal_exc
        except BaseException:
            # what numba's dispatcher raises when the signal handler raised inside it
            raise SystemError("CPUDispatcher(<function _instants>) returned a result with an "
                              "exception set") from None

    monkeypatch.setattr(cli_module.cli, "invoke", kernel_interrupted)
    assert cli_module.main(["fit", "x"]) == code
    err = capsys.readouterr().err
    assert err == f"hotshard: {word} (files being written were removed)\n"


@pytest.mark.parametrize("signal_name,code,word", [
    ("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_a_signal_an_engine_turns_into_its_own_error_is_an_interrupt(monkeypatch, capsys,
                                                                      signal_name, code, word):
    """DuckDB runs the signal handler inside a query, keeps the handler's exception to itself
    and raises its own ("Query interrupted"), or a wrapper turns that into a one-line error:
    the run still ends as the signal says, in one line. Ctrl-C keeps Python's own handler
    (asyncio's runner turns it into a cancellation only when it is that one); SIGTERM's is
    hotshard's, which records it."""
    from hotshard.errors import InputError

    sigint = signal.getsignal(signal.SIGINT)   # Python's, or whatever a library put there
    for raised in (RuntimeError("Query interrupted"),
                   InputError("cannot count x.parquet: Query interrupted")):
        def query_interrupted(ctx, raised=raised):
            if signal_name == "SIGTERM":
                with contextlib.suppress(BaseException):  # swallowed by the engine
                    cli_module._on_sigterm(None, None)
            raise raised

        monkeypatch.setattr(cli_module.cli, "invoke", query_interrupted)
        assert cli_module.main(["fit", "x"]) == code
        assert capsys.readouterr().err == f"hotshard: {word} (files being written were removed)\n"
        # a run that ended by itself leaves no watchdog to end its process later
        assert cli_module._WATCHDOG == []
    # the next run in the process starts with no signal on record; a real error is one
    monkeypatch.setattr(cli_module.cli, "invoke", lambda ctx: (_ for _ in ()).throw(
        InputError("a real mistake")))
    assert cli_module.main(["fit", "x"]) == 2
    assert signal.getsignal(signal.SIGINT) is sigint   # main() left Ctrl-C's handler be


def test_another_system_error_is_not_swallowed(monkeypatch):
    def broken(ctx):
        raise SystemError("a real bug")

    monkeypatch.setattr(cli_module.cli, "invoke", broken)
    with pytest.raises(SystemError, match="a real bug"):
        cli_module.main(["fit", "x"])


def test_progress_off_a_terminal_is_a_plain_line_now_and_then(capsys):
    from hotshard.cli._console import ProgressBar

    now = [100.0]
    bar = ProgressBar(True, tty=False, clock=lambda: now[0], every_s=15.0)
    with bar:
        assert bar.callback is bar
        for t, fraction in ((5, 0.1), (16, 0.4), (20, 0.5), (31.5, None)):
            now[0] = 100.0 + t
            bar("counting events per key", fraction)
    assert capsys.readouterr().err.splitlines() == [
        "hotshard: progress: counting events per key 40% (16 s)",
        "hotshard: progress: counting events per key (32 s)"]
    quiet = ProgressBar(False, tty=False)
    assert quiet.callback is None


def test_a_drive_off_a_terminal_says_how_it_goes_now_and_then(capsys):
    """A minute's drive piped to a log was a minute of silence: now a plain line every
    PLAIN_EVERY_S (5 s)."""
    from hotshard.cli._console import PLAIN_EVERY_S as EVERY
    from hotshard.cli.drive import _Live
    from hotshard.drive.record import Recorder

    now = [0.0]
    live = _Live(True, tty=False, clock=lambda: now[0])
    rec = Recorder()
    rec.record(intended=0.0, sent=0.0, done=0.002, shard="0", error=None, is_read=True,
               key="k")
    for t in (EVERY / 3, EVERY * 1.2, EVERY * 1.6, EVERY * 2.4):  # lines at 1.2 and 2.4
        now[0] = t
        live.update({"t": t, "sent": round(200 * t), "inflight": 3, "recorder": rec})
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all(x.startswith("hotshard: progress:") for x in lines)
    assert f"sent {round(200 * EVERY * 1.2):,} (200/s)" in lines[0]
    assert "p99 so far 2.0 ms" in lines[0]
    assert _Live(False, tty=False).plain is False


def test_notes_fit_a_terminal_and_stay_one_line_in_a_log(capsys, monkeypatch):
    from hotshard.cli import _console

    text = "the admin token is " + "y" * 40 + " and " + "a long explanation " * 12
    _console.note(text)
    assert len(capsys.readouterr().err.splitlines()) == 1
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    _console.note(text)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 1 and all(len(line) <= 100 for line in lines)


SWALLOWING = """
import signal, sys, time
import hotshard.cli as cli
from hotshard._atomic import atomic_write
cli.TERM_GRACE_S = 0.5
signal.signal(signal.SIGTERM, cli._on_sigterm)
def swallow():
    while True:   # as a C callback does: the handler's exception printed and dropped
        try:
            time.sleep(0.05)
        except BaseException:
            pass
with atomic_write(sys.argv[1]) as handle:
    handle.write("partial")
    try:   # wherever the one SIGTERM's exception lands (the loop's jump back lies outside
        print("ready", flush=True)   # its try), it is dropped and the run goes on
        swallow()
    except BaseException:
        swallow()
"""


def test_a_sigterm_whose_exception_is_swallowed_still_ends_the_run(tmp_path):
    """Python drops an exception raised inside a C callback (numba loading a kernel): a
    SIGTERM that lands there used to let the run go on. The handler arms a watchdog that ends
    the process (143), its partial output removed."""
    import signal
    import subprocess
    import time

    out = tmp_path / "out.txt"
    proc = subprocess.Popen([sys.executable, "-c", SWALLOWING, str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "terminated (files being written were removed)" in err
    assert time.monotonic() - started < 10
    assert list(tmp_path.iterdir()) == []


def test_a_ctrl_c_while_the_cli_is_still_importing_is_one_line_and_130():
    """`hotshard.__main__.run` imports the CLI under a guard: a Ctrl-C that lands before
    `cli.main` handles it is an interrupted run (130, one line), not a traceback. The import
    is made to raise as a Ctrl-C there would."""
    import subprocess

    code = ("import builtins, sys\n"
            "real = builtins.__import__\n"
            "def interrupted(name, *a, **k):\n"
            "    if name == 'hotshard.cli':\n"
            "        raise KeyboardInterrupt\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = interrupted\n"
            "from hotshard.__main__ import run\n"
            "sys.exit(run())\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 130, res.stderr
    assert res.stderr == "hotshard: interrupted\n"
