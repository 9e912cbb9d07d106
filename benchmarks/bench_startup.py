"""Benchmark: whole-process wall time of everyday commands, start-up included (STYLE 4b).

A fit that computes in milliseconds used to take seconds because of imports and first-call
set-up (numba, scipy). This times each command as a user runs it, as a new process (best of
``--repeats`` runs after one untimed warm-up, so compiled caches exist and files are in the
page cache), next to a bare interpreter doing the imports the command cannot avoid:

* ``hotshard --help`` against ``python -c pass``: target < 0.3 s;
* ``hotshard fit F`` (F: 1e6 seeded Zipf values, one integer per line) against a whole-process
  ``powerlaw.Fit`` of the same file (read with ``np.loadtxt``, ``discrete=True``, alpha range
  [1, 6]), in the same run: target >= 15x faster; both fits are printed to show they agree;
* ``hotshard shard somekey -p redis-cluster -n 3`` and
  ``hotshard generate --dist zipf:1.1:1e6 --messages 10 -o OUT.parquet`` against
  ``python -c "import numpy, pyarrow"``: targets < 1.5 s.

It also reports whether ``hotshard fit`` loaded numba or scipy (a small fit should not).

    pip install -e '.[bench]'    # powerlaw, for the baseline only
    python benchmarks/bench_startup.py [--repeats 5] [--size 1e6] [--alpha 2.5] [--seed 1]

The hotshard commands run through the installed entry point next to ``sys.executable``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _timing import best_time

PY = sys.executable
HOTSHARD = str(Path(PY).with_name("hotshard"))

POWERLAW_FIT = (
    "import sys, warnings\n"
    "import numpy as np, powerlaw\n"
    "warnings.simplefilter('ignore')\n"
    "f = powerlaw.Fit(np.loadtxt(sys.argv[1]), discrete=True, verbose=0,\n"
    "                 parameter_ranges={'alpha': [1, 6]})\n"
    "print(f.alpha, int(f.xmin))\n"
)

HEAVY_MODULES = (
    "import sys\n"
    "from hotshard.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'scipy'})\n"
    "print(' '.join(heavy) or 'none', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"command failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    return done


def timed(cmd: list[str], repeats: int) -> tuple[float, subprocess.CompletedProcess]:
    """(best wall seconds of ``repeats`` runs after one warm-up, the last run)."""
    run(cmd)
    return best_time(lambda: run(cmd), repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per command (best kept)")
    parser.add_argument("--size", type=float, default=1e6, help="values in the fit's input")
    parser.add_argument("--alpha", type=float, default=2.5, help="Zipf exponent of those values")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline-repeats", type=int, default=3,
                        help="runs of the (slow) powerlaw baseline")
    args = parser.parse_args()
    if args.repeats < 3 or args.baseline_repeats < 3:
        parser.error("best of at least 3 runs: the machine is noisy")
    if not Path(HOTSHARD).exists():
        raise SystemExit(f"no hotshard entry point at {HOTSHARD}: pip install -e .")
    try:
        import powerlaw  # noqa: F401
    except ImportError:
        raise SystemExit("the baseline needs powerlaw: pip install -e '.[bench]'") from None

    rows: list[tuple[str, float, str, str]] = []  # (what, seconds, target, verdict)

    def row(what: str, seconds: float, target: str = "", met: bool | None = None) -> None:
        rows.append((what, seconds, target, "" if met is None else "met" if met else "MISSED"))

    with tempfile.TemporaryDirectory(prefix="hotshard-bench-") as tmp:
        values = Path(tmp, "zipf.txt")
        x = np.random.default_rng(args.seed).zipf(args.alpha, int(args.size))
        np.savetxt(values, x, fmt="%d")
        out = str(Path(tmp, "tmp.parquet"))

        bare, _ = timed([PY, "-c", "pass"], args.repeats)
        helped, _ = timed([HOTSHARD, "--help"], args.repeats)
        row("python -c pass (reference)", bare)
        row(f"hotshard --help (+{helped - bare:.3f} s over python)", helped, "< 0.3 s",
            helped < 0.3)

        numpy_only, _ = timed([PY, "-c", "import numpy"], args.repeats)
        ours, _ = timed([HOTSHARD, "fit", str(values)], args.repeats)
        base, base_run = timed([PY, "-c", POWERLAW_FIT, str(values)], args.baseline_repeats)
        ratio = base / ours
        row("python -c 'import numpy' (reference)", numpy_only)
        row(f"hotshard fit ({int(args.size):,} values)", ours)
        row("powerlaw.Fit, same file, whole process", base)
        row("  ratio powerlaw / hotshard fit", ratio, ">= 15x", ratio >= 15)

        imports = run([PY, "-c", HEAVY_MODULES, "fit", str(values)]).stderr.strip()
        fitted = json.loads(run([HOTSHARD, "fit", str(values), "--json"]).stdout)
        base_alpha, base_xmin = base_run.stdout.split()

        arrow, _ = timed([PY, "-c", "import numpy, pyarrow"], args.repeats)
        shard, _ = timed([HOTSHARD, "shard", "somekey", "-p", "redis-cluster", "-n", "3"],
                         args.repeats)
        gen, _ = timed([HOTSHARD, "generate", "--dist", "zipf:1.1:1e6", "--messages", "10",
                        "-o", out], args.repeats)
        row("python -c 'import numpy, pyarrow' (reference)", arrow)
        row("hotshard shard somekey -p redis-cluster -n 3", shard, "< 1.5 s", shard < 1.5)
        row("hotshard generate --dist zipf:1.1:1e6 --messages 10", gen, "< 1.5 s", gen < 1.5)

    print(f"whole-process wall seconds, best of {args.repeats} (powerlaw: best of "
          f"{args.baseline_repeats}), after one warm-up run each; python {sys.version.split()[0]}")
    width = max(len(r[0]) for r in rows)
    print(f"{'command':<{width}}  {'seconds':>8}  {'target':<8}  verdict")
    print("-" * (width + 30))
    for what, seconds, target, verdict in rows:
        value = f"{seconds:7.1f}x" if what.strip().startswith("ratio") else f"{seconds:8.3f}"
        print(f"{what:<{width}}  {value:>8}  {target:<8}  {verdict}")
    same = (abs(fitted["alpha"] - float(base_alpha)) <= 0.01
            and fitted["xmin"] == int(base_xmin))
    print(f"fits: hotshard alpha {fitted['alpha']:.4f} xmin {fitted['xmin']}; powerlaw alpha "
          f"{float(base_alpha):.4f} xmin {base_xmin}; same alpha (+-0.01) and xmin: "
          f"{'yes' if same else 'NO'}")
    print(f"numba/scipy loaded by `hotshard fit`: {imports}")


if __name__ == "__main__":
    main()
