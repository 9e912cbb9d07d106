"""The ``hotshard`` command: one subcommand per capability, each a thin shell over the library.

Only this module prints for the user or exits. A user mistake (``HotshardError`` or a bad
option) becomes one line ``hotshard: error: ...`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
import sys

import click

from hotshard import __version__
from hotshard.errors import HotshardError

ALTERNATIVE_NAMES = ("lognormal", "exponential", "truncated_power_law")


class AlternativeList(click.ParamType):
    """Comma-separated alternatives for --compare, checked when parsed."""

    name = "LIST"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        names = tuple(v.strip() for v in str(value).split(",") if v.strip())
        for n in names:
            if n not in ALTERNATIVE_NAMES:
                self.fail(f"unknown alternative {n!r}; choose from {', '.join(ALTERNATIVE_NAMES)}",
                          param, ctx)
        if not names:
            self.fail("give at least one alternative", param, ctx)
        return names


def note(message: str) -> None:
    """A one-line remark on stderr that does not stop the command."""
    click.echo(f"hotshard: note: {message}", err=True)


def _write_json(path: str, payload: dict) -> None:
    from hotshard._atomic import atomic_write

    with atomic_write(path) as handle:
        json.dump(payload, handle, indent=2)
        handle.write("\n")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hotshard")
def cli() -> None:
    """hotshard: make load tests of partitioned stores tell the truth about hot keys.

    Uniform synthetic keys spread load perfectly over every shard, so a load test built on them
    measures a system that cannot occur in production, where a few keys carry much of the
    traffic and one shard runs hot. hotshard profiles the real key distribution (counts only),
    fits its tail, and drives tests and predictions from it.
    """


@cli.command()
@click.argument("input_path", metavar="INPUT")
@click.option("--column", metavar="NAME", help="Read this column of a CSV/TSV/Parquet table.")
@click.option("--histogram", is_flag=True,
              help="INPUT is a frequency histogram: 'value<TAB>count' lines, header allowed.")
@click.option("--xmin", type=click.IntRange(min=1), metavar="N",
              help="Fix the start of the tail instead of choosing it by minimum KS distance.")
@click.option("--bootstrap", type=click.IntRange(min=0), default=0, show_default=True,
              metavar="N",
              help="Synthetic sets for the goodness-of-fit p-value (CSN use 2500 for +/-0.01).")
@click.option("--seed", type=click.IntRange(min=0), metavar="S",
              help="Seed of the bootstrap: same seed, same p-value, whatever --workers.")
@click.option("--workers", type=click.IntRange(min=1), metavar="W",
              help="Processes for the bootstrap [default: all cores].")
@click.option("--compare", type=AlternativeList(), default=None, metavar="LIST",
              help="Vuong likelihood-ratio tests against: lognormal,exponential,"
                   "truncated_power_law.")
@click.option("--min-tail", type=click.IntRange(min=2), default=10, show_default=True,
              metavar="N", help="Fewest observations a tail may hold.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a summary.")
@click.option("-o", "--output", metavar="FILE", help="Also write the JSON result to FILE.")
def fit(input_path, column, histogram, xmin, bootstrap, seed, workers, compare, min_tail,
        as_json, output):
    """Fit a discrete power law to the tail of positive integers (Clauset-Shalizi-Newman 2009).

    INPUT holds one positive integer per line (a request count per key, a degree, ...), or a
    table column (--column), or a frequency histogram (--histogram); '-' reads standard input.
    alpha is the exact discrete maximum-likelihood estimate (Hurwitz zeta normalisation) with
    its standard error; xmin minimises the Kolmogorov-Smirnov distance unless --xmin fixes it.
    Zeros are dropped with a note: the law lives on x >= 1.

    \b
    Examples:
      hotshard fit words.txt --bootstrap 2500 --seed 1 --compare lognormal,exponential
      hotshard fit weblinks.hist --histogram --xmin 3684 --json
    """
    from hotshard.profile.fit import fit_power_law
    from hotshard.profile.read import read_observations
    from hotshard.render import fit_summary

    obs = read_observations(input_path, column=column, histogram=histogram)
    result = fit_power_law(obs.values, obs.counts, xmin=xmin, bootstrap=bootstrap, seed=seed,
                           workers=workers, compare=compare or (), min_tail=min_tail)
    if result.zeros_dropped:
        note(f"dropped {result.zeros_dropped:,} zero values (a power law lives on x >= 1)")
    payload = {"source": input_path, **result.to_dict()}
    if output:
        _write_json(output, payload)
    if as_json:
        click.echo(json.dumps(payload))
    else:
        click.echo(fit_summary(result, input_path))


@cli.command()
@click.option("--seed", type=click.IntRange(min=0), default=2026, show_default=True,
              help="Seed of the synthetic production data.")
def demo(seed):
    """Run the end-to-end story on embedded defaults (no files needed).

    Synthesises a day of chat traffic whose channel popularity is heavy-tailed, as live
    streaming is, then shows what a uniform-key load test hides: the head's share of traffic
    and the fitted tail that hotshard profiles are built from.
    """
    from hotshard.demo import run_demo

    click.echo(run_demo(seed=seed))


# click >= 8.2 raises this for a bare `hotshard` when not in standalone mode
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning user mistakes into one line and exit status 2."""
    try:
        rv = cli.main(args=argv, prog_name="hotshard", standalone_mode=False)
    except HotshardError as exc:
        click.echo(f"hotshard: error: {exc}", err=True)
        return 2
    except _NO_ARGS_IS_HELP as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 2
    except click.UsageError as exc:
        hint = f" (see 'hotshard {exc.ctx.command_path.split(' ', 1)[1]} --help')" if (
            exc.ctx and " " in exc.ctx.command_path) else " (see 'hotshard --help')"
        click.echo(f"hotshard: error: {exc.format_message()}{hint}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"hotshard: error: {exc.format_message()}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("hotshard: interrupted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("hotshard: interrupted", err=True)
        return 130
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (| head): not an error
        return 0
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
