"""Compile hotshard's numba kernels once, before `make test` starts its parallel passes.

Every kernel is cached (``cache=True``) beside its module, but a fresh checkout has no cache,
and the four test processes, the timing pass and the commands they start would each compile
the same kernels at once (a simulation alone compiles for ~7 s of CPU) until one of them had
written the cache. This runs the paths most tests take through the compiled modules (profile
with locality and arrivals, generate in locality order, predict with every partitioner,
simulate the scenarios and with a cache, the numba fit), so that the passes load those
kernels instead, and calls the kernels those commands do not reach directly. On a checkout
whose caches are warm it takes about two seconds.

It also has pytest write the test modules' rewritten bytecode when any is missing or stale
(the ``tests`` part; ``warm_test_bytecode``).

    python -m tests._warm_kernels [data|sim|tests]...
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "traces" / "web07.parquet"
EVENT_PROFILE = ROOT / "examples" / "incident-event.profile.json"


def _cli(*args: str) -> None:
    from hotshard.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(list(args))
    if code == 130:  # Ctrl-C: the command said nothing was kept; stop as it did
        raise SystemExit(130)
    if code:
        said = (err.getvalue().strip().splitlines() or ["(nothing on stderr)"])[-1]
        raise SystemExit(f"warming the kernels: `hotshard {' '.join(args)}` exited {code}: "
                         f"{said}")


def _fit() -> None:
    import numpy as np

    from hotshard.profile.fit import fit_power_law

    counts = np.random.default_rng(0).zipf(2.0, 20_000)
    fit_power_law(counts, engine="numba", bootstrap=2, seed=0, workers=1)


def _direct() -> None:
    """Kernels (and argument types) the commands above do not reach but the tests do, found
    by comparing the signatures cached after this warm-up with those after a whole run on a
    fresh clone: the locality pass over integer keys, exact and sampled (SHARDS); the fit's
    zeta and alpha called one at a time; jump over 64-bit hashes; YCSB's hashed ranks; the
    simulator's exact LRU; the hash kernels on read-only bytes (what encode_keys returns)."""
    import numpy as np

    from hotshard.profile import _kernels as fit_kernels
    from hotshard.profile._locality_kernels import _after, stack_pass
    from hotshard.profile._time_kernels import count_windows
    from hotshard.profile.locality import (
        BINS_PER_OCTAVE,
        N_BINS,
        bin_lows,
        class_of,
        measure_locality,
    )
    from hotshard.shards import _hashes
    from hotshard.shards.partitioners import encode_keys
    from hotshard.sim._lru import lru_kernel
    from hotshard.workload._kernels import fnv1_64_of_longs

    keys = np.arange(5000, dtype=np.int64) % 300
    measure_locality(keys)
    key_class = class_of(np.bincount(keys))  # the stack pass as its unit tests call it
    stack_pass(keys, 300, key_class, int(key_class.max()) + 1, N_BINS, bin_lows(),
               BINS_PER_OCTAVE)
    counts = np.zeros(2, dtype=np.int64)  # and its marker count, which they test alone
    _after(np.zeros(16, dtype=np.uint64), counts, counts, counts, 0, 1)
    measure_locality(keys, sample_rate=0.5)
    t = np.arange(8, dtype=np.float64)   # the time sections' stream counter
    out = [np.empty(8, np.int64), np.empty(8, np.int64), np.empty(8), np.empty(8)]
    count_windows(t, keys[:8], 0.01, np.zeros(4, np.int64), 1, np.zeros(0, np.int64), 0, 1,
                  1, np.zeros(1, np.int64), *out)
    fit_kernels.hurwitz_zeta(2.5, 1.0)
    fit_kernels.hurwitz_zeta3(2.5, 1.0)
    fit_kernels.mle_alpha(1.0, 1.0)
    _hashes.jump(keys, 4)
    fnv1_64_of_longs(keys)
    lru_kernel(keys % 50, 50, 10, np.zeros(0, dtype=np.int64))
    text = encode_keys([f"k{i}" for i in range(8)], "text")
    for kernel in (_hashes.crc16_xmodem, _hashes.redis_slots, _hashes.cassandra_tokens,
                   _hashes.md5_prefix64, _hashes.murmur3_64, _hashes.kafka_murmur2):
        kernel(*text)
    _hashes.cassandra_tokens(*encode_keys(["1", "2"], "bigint"))
    _hashes.md5_prefix64(*encode_keys(["1", "2"], "bson-int"))
    _hashes.murmur3_x86_32(*encode_keys(["a", "b"], "utf16le"), 0)


def warm_data(tmp: Path) -> None:
    """Profiling, the fit, the arrival summary, generating, every partitioner's hash
    kernels."""
    from hotshard.shards import PARTITIONERS

    profile = str(tmp / "web07.json")
    _cli("profile", str(TRACE), "--key", "key", "-o", profile)
    _fit()
    _direct()
    _cli("generate", profile, "--messages", "2e4", "--order", "locality", "-o",
         str(tmp / "g.parquet"))
    _cli("generate", str(EVENT_PROFILE), "--messages", "2e4", "-o", str(tmp / "e.parquet"))
    for name in PARTITIONERS:
        if name != "map":  # a map partitioner is read from a file: no kernel of its own
            _cli("predict", profile, "-p", name, "-n", "4")


def warm_sim(tmp: Path) -> None:
    """The simulator: the scenarios (profile arrivals, events, mitigations) and a cache."""
    for scenario in ("incident-test", "incident-production", "incident-mitigated"):
        _cli("simulate", "--scenario", scenario, "--duration", "10s")
    _cli("simulate", "--dist", "zipf:1.1:1e4", "--rps", "500", "--duration", "10s",
         "--cache-size", "100")


def _rewritten(source: Path, cached: Path) -> bool:
    """Whether pytest would load ``cached`` for ``source``: the check pytest 9 makes (the magic
    number, checked-hash flags, then the hash of the source's bytes as recorded in the
    header)."""
    import importlib.util

    try:
        with cached.open("rb") as handle:
            header = handle.read(16)
        source_hash = importlib.util.source_hash(source.read_bytes())
    except OSError:
        return False
    return (len(header) == 16 and header[:4] == importlib.util.MAGIC_NUMBER
            and header[4:8] == b"\x03\x00\x00\x00" and header[8:16] == source_hash[:8])


def warm_test_bytecode() -> None:
    """Have pytest write its assertion-rewritten bytecode of the test modules once, if any is
    missing or stale.

    A fresh checkout has none: each of the four test processes and the timing pass would
    rewrite and compile every test module itself when it collects (~2.5 s of CPU a process,
    measured: a cold collection 7.0 s, a warm one 4.5 s). On a checkout whose bytecode is fresh
    this only hashes the test files (~0.1 s). Relies on pytest 9's hash-checked pyc files
    (pyproject.toml asks for pytest >= 9.2). Installed pytest plugins' modules, which pytest
    rewrites too, are not checked: they are written once per virtualenv."""
    import os
    import subprocess

    from _pytest.assertion.rewrite import PYC_TAIL, get_cache_dir

    sources = [p for p in (ROOT / "tests").rglob("*.py")
               if p.name.startswith("test_") or p.name == "conftest.py"]
    if all(_rewritten(source, get_cache_dir(source) / (source.stem + PYC_TAIL))
           for source in sources):
        return
    # a collection error is reported by the passes themselves, with its context
    subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                    "-p", "no:cacheprovider"], cwd=ROOT, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False,
                   env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})


def main(argv: list[str] | None = None) -> None:
    """``data``, ``sim``, ``tests`` or all (no argument): parts that can run side by side."""
    parts = (argv if argv is not None else sys.argv[1:]) or ["data", "sim", "tests"]
    with tempfile.TemporaryDirectory(prefix="hotshard-warm-") as tmp:
        for part in parts:
            {"data": warm_data, "sim": warm_sim,
             "tests": lambda _tmp: warm_test_bytecode()}[part](Path(tmp))


if __name__ == "__main__":
    main()
