"""A command with modes: it runs by itself, and its other modes are subcommands (``git stash``
and ``git stash list``), so each mode declares only the options it takes.

``hotshard simulate PROFILE ...`` runs the model; ``hotshard simulate replay RUN.json`` is
another command with its own options and ``--help``. Flags that would change what the other
flags mean (``--replay``, ``--verify``) needed tables of which options conflict; a mode of its
own needs none.
"""

from __future__ import annotations

import click

__all__ = ["ModeArgument", "ModeGroup"]


class ModeArgument(click.Argument):
    """The default mode's argument: left out of its modes' usage line (``hotshard simulate
    like RUN.json``, not ``hotshard simulate [PROFILE] like RUN.json``)."""

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        return []


class ModeGroup(click.Group):
    """A group whose own callback is the default mode, run when the first argument is not
    one of its subcommands (a file named like a mode: give it as ``./replay``)."""

    allow_interspersed_args = True   # the default mode: PROFILE before or after its options

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("invoke_without_command", True)
        kwargs.setdefault("no_args_is_help", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in self.commands:
            # a mode: the default mode's own options stay at their defaults, unread
            click.Command.parse_args(self, ctx, [])
            ctx._protected_args, ctx.args = args[:1], args[1:]
            return ctx.args
        rest = click.Command.parse_args(self, ctx, args)
        if rest and not ctx.resilient_parsing:
            ctx.fail(f"unexpected argument {rest[0]!r}: the modes are "
                     f"{', '.join(self.commands)}, given first")
        return []

    def invoke(self, ctx: click.Context):
        if not ctx._protected_args:
            return super().invoke(ctx)   # the default mode
        args = [*ctx._protected_args, *ctx.args]
        ctx.args, ctx._protected_args = [], []
        with ctx:   # a mode runs alone: the default mode's callback is not called
            name, command, args = self.resolve_command(ctx, args)
            assert command is not None
            ctx.invoked_subcommand = name
            sub = command.make_context(name, args, parent=ctx)
            with sub:
                return sub.command.invoke(sub)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        pieces = click.Command.collect_usage_pieces(self, ctx)
        return pieces + [param.make_metavar(ctx) for param in self.get_params(ctx)
                         if isinstance(param, ModeArgument)]

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_usage(ctx, formatter)
        formatter.write_usage(ctx.command_path, "MODE [ARGS]...", prefix="   or: ")

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, command.get_short_help_str(limit=formatter.width - 20))
                for name, command in self.commands.items() if not command.hidden]
        if rows:
            with formatter.section("Modes (each with its own --help)"):
                formatter.write_dl(rows)
