"""`hotshard fit`: the discrete power-law tail fit of Clauset, Shalizi & Newman (2009)."""

from __future__ import annotations

import json

import click

from hotshard.cli._console import interruptible, note, write_json
from hotshard.cli._options import AlternativeList


@click.command()
@click.argument("input_path", metavar="INPUT")
@click.option("--column", metavar="NAME",
              help="INPUT is a table (CSV/TSV/semicolon-separated with a header line, or "
                   "Parquet): read the column named NAME in its header.")
@click.option("--histogram", is_flag=True,
              help="INPUT is a frequency histogram: 'value<TAB>count' lines, header allowed.")
@click.option("--xmin", type=click.IntRange(min=1), metavar="N",
              help="Fix the start of the tail instead of choosing it by minimum KS distance.")
@click.option("--bootstrap", type=click.IntRange(min=0), default=0, show_default=True,
              metavar="N",
              help="Synthetic sets for the goodness-of-fit p-value (CSN use 2500 for +/-0.01).")
@click.option("--seed", type=click.IntRange(min=0), metavar="S",
              help="Seed of the bootstrap: same seed, same p-value, whatever --workers "
                   "(used only with --bootstrap).")
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

    INPUT holds one positive integer per line (a request count per key, a degree, ...); or it
    is a table (comma-, tab- or semicolon-separated with a header line, or Parquet) and
    --column NAME reads the column of that name; or a frequency histogram (--histogram).
    '-' reads standard input.
    alpha is the exact discrete maximum-likelihood estimate (Hurwitz zeta normalisation) with
    its standard error; xmin minimises the Kolmogorov-Smirnov distance unless --xmin fixes it.
    Zeros are dropped with a note: the law lives on x >= 1.

    \b
    Examples:
      hotshard fit words.txt --bootstrap 2500 --seed 1 --compare lognormal,exponential
      hotshard fit requests_per_key.csv --column requests
      hotshard fit weblinks.hist --histogram --xmin 3684 --json
    """
    from hotshard._atomic import check_writable
    from hotshard.errors import InputError
    from hotshard.profile.fit import fit_power_law
    from hotshard.profile.read import HeaderLineError, read_fit_input
    from hotshard.render import fit_summary

    if output:
        check_writable(output)
    if seed is not None and not bootstrap:
        note("--seed only matters with --bootstrap N (the fit itself is not random): "
             "ignoring it")
    try:
        data = read_fit_input(input_path, column=column, histogram=histogram)
    except HeaderLineError as exc:  # the library names the parameter; here it is a flag
        flag = f"--column {exc.columns[0]}" if len(exc.columns) == 1 else "--column NAME"
        raise InputError(f"{exc} ({flag})") from None
    def work(progress=None):
        return fit_power_law(data.values, data.counts, xmin=xmin, bootstrap=bootstrap,
                             seed=seed, workers=workers, compare=compare or (),
                             min_tail=min_tail, progress=progress)

    # the compiled scan holds the main thread for minutes on huge inputs: run it in a thread
    # so Ctrl-C and SIGTERM are still handled (the bootstrap's process pool is interruptible)
    slow = None if xmin else ("the fit is taking a while: choosing xmin tries every distinct "
                              "value (Ctrl-C stops it); --xmin N fixes the tail's start")
    if bootstrap:   # thousands of refits: say how far they are
        from hotshard.cli._console import ProgressBar

        with ProgressBar(True) as bar:
            result = work(bar.callback)
    else:
        result = interruptible(work, slow_note=slow)
    if result.zeros_dropped:
        note(f"dropped {result.zeros_dropped:,} zero values (a power law lives on x >= 1)")
    payload = {"source": input_path, **result.to_dict()}
    if output:
        write_json(output, payload)
    if as_json:
        click.echo(json.dumps(payload))
    else:
        click.echo(fit_summary(result, input_path))
