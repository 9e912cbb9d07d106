"""One error hierarchy: every exception class hotshard defines derives from HotshardError and is
found in hotshard.errors, so a caller reads one module to know what to catch."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

import hotshard.errors as errors
from hotshard.errors import HotshardError

SRC = Path(__file__).resolve().parents[1] / "src" / "hotshard"

# Not errors: signals that unwind the stack like Ctrl-C (files being written are removed on
# the way out); they derive from BaseException so that `except Exception` does not stop them.
INTERRUPTS = {"hotshard.cli.Terminated", "hotshard.service.server.LoadInterrupted"}

_BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                       if isinstance(value, type) and issubclass(value, BaseException)}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _statements(tree: ast.AST):
    """Every statement in ``tree``, nested ones too (a class can only be defined by a
    statement): ast.walk would also visit every expression, ~10x the nodes, and this scan
    runs at collection in every test process."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(child for child in getattr(node, field, None) or ()
                         if isinstance(child, ast.AST))


def _exception_classes() -> list[tuple[str, str]]:
    """(module, class) of every class in src/ whose bases are exceptions, read from the source
    (no imports: optional dependencies need not be installed), to a fixed point so subclasses
    of subclasses count."""
    classes: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in _statements(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else
                         b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]
                classes[(_module_name(path), node.name)] = bases
    known = set(_BUILTIN_EXCEPTIONS)
    found: set[tuple[str, str]] = set()
    while True:
        new = {key for key, bases in classes.items()
               if key not in found and any(b in known for b in bases)}
        if not new:
            return sorted(found)
        found |= new
        known |= {name for _, name in new}


def test_the_scan_finds_the_known_classes():
    names = {name for _, name in _exception_classes()}
    assert {"HotshardError", "ShardError", "RespError", "TransportError", "ProtocolError",
            "LoadError", "Terminated", "LoadInterrupted"} <= names


@pytest.mark.parametrize(("module", "name"), _exception_classes())
def test_every_exception_derives_from_hotshard_error(module, name):
    cls = getattr(importlib.import_module(module), name)
    if f"{module}.{name}" in INTERRUPTS:
        assert not issubclass(cls, Exception), f"{name} is an interrupt, not an error"
        return
    assert issubclass(cls, HotshardError), f"{module}.{name} does not derive from HotshardError"
    if not name.startswith("_"):  # a module's private signal may stay with the module
        assert module == "hotshard.errors", f"{name} is defined in {module}, not hotshard.errors"
        assert getattr(errors, name) is cls and name in errors.__all__


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_inherits_a_builtin_too(name):
    """``except ValueError`` / ``except ConnectionError`` keep working for library callers."""
    cls = getattr(errors, name)
    builtin_bases = [b for b in cls.__mro__ if b.__module__ == "builtins"
                     and b not in (Exception, BaseException, object)]
    assert name == "HotshardError" or builtin_bases, f"{name} inherits no builtin exception"


@pytest.mark.parametrize(("module", "name"), [
    ("hotshard.drive.transport", "TransportError"),
    ("hotshard.service.protocol", "ProtocolError"),
    ("hotshard.service.supervisor", "ShardError"),
    ("hotshard.service.supervisor", "ShardTimeout"),
    ("hotshard.service.supervisor", "ShardUnavailable"),
    ("hotshard.service.bulk_load", "LoadError"),
    ("hotshard.cluster.resp", "RespError"),
    ("hotshard.cluster.resp", "NodeUnreachable"),
    ("hotshard.cluster.resp", "NodeLoading"),
    ("hotshard.profile.read", "HeaderLineError"),
])
def test_old_import_locations_still_work(module, name):
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_transport_and_protocol_errors_reach_the_cli_as_one_line(monkeypatch, capsys):
    """They used to escape ``main`` as tracebacks; now a HotshardError: one line, exit 2."""
    import hotshard.cli as cli_module

    for error in (errors.TransportError("connect error", shard="127.0.0.1:7000"),
                  errors.ProtocolError("frame is not JSON")):
        def boom(*args, _error=error, **kwargs):
            raise _error
        monkeypatch.setattr(cli_module.cli, "invoke", boom)
        assert cli_module.main(["fit", "--help"]) == 2
        err = capsys.readouterr().err
        assert err == f"hotshard: error: {error}\n"
        assert err.count("\n") == 1


def test_a_message_names_parameters_that_the_cli_words_as_flags():
    """The library names a parameter, the CLI the flag that set it: no message is edited."""
    from hotshard.errors import InputError

    exc = InputError("${rate} must be > 0, got -1 (or lower ${processes})")
    assert str(exc) == "rate must be > 0, got -1 (or lower processes)"
    assert exc.parameters == ("rate", "processes")
    assert exc.worded({"rate": "--rps"}) == "--rps must be > 0, got -1 (or lower processes)"
    wrapped = InputError(f"run.json: {exc.template}")   # a wrapping error keeps them named
    assert wrapped.worded({"processes": "--workers"}).endswith("(or lower --workers)")


def test_the_cli_words_a_library_error_in_the_running_commands_flags():
    from hotshard.drive.run import DriveConfig
    from hotshard.errors import InputError
    from tests.conftest import run_cli

    with pytest.raises(InputError) as caught:
        DriveConfig(url="http://127.0.0.1:9", keys="uniform:10", rate=10**6).check_schedulable()
    assert "use processes 20 (or lower rate)" in str(caught.value)
    res = run_cli("drive", "http://127.0.0.1:9", "--dist", "uniform:10", "--rps", "1e6")
    assert res.returncode == 2 and "use --workers 20 (or lower --rps)" in res.stderr, res.stderr
    res = run_cli("generate", "--dist", "uniform:10", "-o", "x.parquet")
    assert "give --messages, or a --duration" in res.stderr, res.stderr


def test_a_note_names_parameters_too_and_the_cli_words_it_in_flags():
    from hotshard.errors import Phrase
    from tests.conftest import run_cli

    phrase = Phrase("simulating 3 req/s (${rps} sets it)")
    assert phrase == "simulating 3 req/s (rps sets it)" and isinstance(phrase, str)
    assert phrase.worded({"rps": "--rps"}) == "simulating 3 req/s (--rps sets it)"
    res = run_cli("simulate", str(Path(__file__).parents[1] / "examples/incident.profile.json"),
                  "--duration", "5s", "-n", "4")
    assert res.returncode == 0, res.stderr
    assert "(--rps sets it)" in res.stderr and "${" not in res.stderr
