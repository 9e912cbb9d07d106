"""One flag, one meaning, in every command: each flag of every command (its modes and
subcommands too) is in the glossary (``hotshard.cli._options.GLOSSARY``), takes the kind of
value its entry says, and is none of the retired second names of a concept."""

from __future__ import annotations

import click
import pytest

from hotshard.cli import cli
from hotshard.cli._options import GLOSSARY, RETIRED, Count, Seconds


def _kind(param: click.Option) -> str:
    """The kind of value an option takes, as the glossary names kinds."""
    kind = param.type
    if param.is_flag or param.secondary_opts:
        return "switch"
    if isinstance(kind, Count):
        return "count"
    if isinstance(kind, Seconds):
        return "duration"
    if isinstance(kind, click.Choice):
        return "choice"
    if isinstance(kind, click.IntRange) or kind is click.INT:
        return "integer"
    if isinstance(kind, click.FloatRange) or kind is click.FLOAT:
        return "number"
    if isinstance(kind, click.DateTime):
        return "time"
    if isinstance(kind, click.Path) or kind is click.STRING:
        return "text"
    return type(kind).__name__


def _options(command: click.Command, path: str):
    """(command path, option) for every option of ``command`` and its subcommands."""
    for param in command.params:
        if isinstance(param, click.Option):
            yield path, param
    for name, sub in getattr(command, "commands", {}).items():
        yield from _options(sub, f"{path} {name}")


def vocabulary_problems(commands: dict[str, click.Command]) -> list[str]:
    """What breaks one-flag-one-meaning across ``commands`` (name -> command)."""
    problems = []
    for name, command in commands.items():
        for path, option in _options(command, name):
            for flag in (*option.opts, *option.secondary_opts):
                if not flag.startswith("--") or flag.startswith("--no-"):
                    continue
                if flag in RETIRED:
                    problems.append(f"{path} {flag}: retired, one concept's second name "
                                    f"(say {RETIRED[flag]})")
                elif flag not in GLOSSARY:
                    problems.append(f"{path} {flag}: not in the glossary")
                elif _kind(option) not in GLOSSARY[flag][1]:
                    problems.append(f"{path} {flag} takes a {_kind(option)}: the glossary "
                                    f"says {flag} is {GLOSSARY[flag][0]} "
                                    f"({'/'.join(sorted(GLOSSARY[flag][1]))})")
    return problems


def _every_command() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    return {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}


def test_every_flag_of_every_command_has_one_meaning():
    commands = _every_command()
    assert len(commands) >= 16
    assert vocabulary_problems(commands) == []


def test_the_glossary_gives_each_concept_one_name():
    meanings = [meaning for meaning, _ in GLOSSARY.values()]
    assert len(meanings) == len(set(meanings)), "two flags with one meaning"
    assert not set(GLOSSARY) & set(RETIRED)
    used = {flag for command in _every_command().values()
            for _, option in _options(command, "") for flag in option.opts}
    assert set(GLOSSARY) <= used, f"glossary entries no command has: {set(GLOSSARY) - used}"


@pytest.mark.parametrize(("option", "problem"), [
    (click.Option(["--keys"], metavar="PROFILE|SPEC"), "--keys takes a text"),  # 2nd meaning
    (click.Option(["--rate"], type=float), "retired"),                         # 2nd name
    (click.Option(["--processes"], type=int), "retired"),
    (click.Option(["--key-space"], type=int), "not in the glossary"),
])
def test_a_planted_second_meaning_or_name_fails(option, problem):
    planted = click.Command("planted", params=[option], callback=lambda **_: None)
    found = vocabulary_problems({**_every_command(), "planted": planted})
    assert len(found) == 1 and problem in found[0], found


def test_modes_are_commands_not_flags():
    """`simulate` runs a model; replaying, resembling a run and listing scenarios are its
    modes; verifying a generated file is generate's."""
    ctx = click.Context(cli)
    simulate, generate = cli.get_command(ctx, "simulate"), cli.get_command(ctx, "generate")
    flags = {flag for _, option in _options(simulate, "") for flag in option.opts
             if _ == ""}
    assert not flags & {"--replay", "--like"}
    assert set(simulate.commands) == {"replay", "like", "scenarios"}
    assert "--verify" not in {f for p in generate.params for f in getattr(p, "opts", [])}
    assert set(generate.commands) == {"verify"}
