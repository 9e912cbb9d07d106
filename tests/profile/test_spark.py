"""Spark and DuckDB give the same profile on the same data (Spark local[2], for real)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotshard.profile.count import count_profile
from hotshard.profile.engines import spark_engine
from tests.conftest import shared

pytest.importorskip("pyspark")


def comparable(profile):
    """The profile but what differs by engine: when and how it was made. Every section is
    the same, the time sections too: arrivals and timelines are the same aggregations
    (``profile.time_counts``) and, below ``DRIVER_REFERENCES``, Spark's locality pass reads
    every reference in the same order (time, ties in input order) as DuckDB's."""
    doc = profile.to_dict()
    doc["source"].pop("created")
    doc["source"].pop("engine")
    return doc


# The JVMs spark-submit starts (its launcher, then the driver) compile with C1 only and
# collect with one GC thread, and Spark SQL runs without whole-stage code generation (read as a
# system property into the session's SparkConf): two short local jobs spend most of their CPU
# in the JIT's C2 compiler, the parallel collector and compiling each query's generated Java
# otherwise (~40 s of CPU for this test, ~23 s with these settings, measured on the whole
# machine: the JVM is not a child pytest reaps). None of them changes what Spark computes. The
# env is set before the test's first Spark session starts its JVM.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dspark.sql.codegen.wholeStage=false"


@pytest.mark.slow
def test_duckdb_and_spark_profiles_are_identical(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    monkeypatch.setenv("JAVA_TOOL_OPTIONS", JVM_OPTIONS)

    # one run covers ops, sizes, rate and string keys (CSV), to start Spark only twice
    trace = shared("traces", "cloudphysics.parquet")
    kwargs = {"key": "lbn", "op": "op", "size": "size", "time_col": "time", "top_k": 200}
    duck = count_profile([str(trace)], **kwargs)
    spark = count_profile([str(trace)], engine="spark", spark_master="local[2]", **kwargs)
    assert duck.locality.method == "exact" and duck.arrivals.tick_s == 1.0
    assert duck.timelines is not None
    assert comparable(duck) == comparable(spark)

    table = pq.read_table(shared("traces", "scarab-recs.parquet"))
    csv = tmp_path / "scarab.csv"
    keys = table.column("key").to_numpy()[:300_000]
    # epoch milliseconds (a JSON log's times): both engines read the unit from the values
    csv.write_text("key,t\n" + "\n".join(f"item-{k},{1_714_560_000_000 + 7 * i}"
                                         for i, k in enumerate(keys)) + "\n")
    duck = count_profile([str(csv)], key="key", time_col="t")
    # past DRIVER_REFERENCES Spark samples keys (SHARDS, a third of them here) and brings
    # only their references to the driver
    monkeypatch.setattr(spark_engine, "DRIVER_REFERENCES", 100_000)
    spark = count_profile([str(csv)], key="key", time_col="t", engine="spark",
                          spark_master="local[2]")
    assert duck.rate["seconds"] == spark.rate["seconds"] == 2100  # 300,000 x 7 ms
    assert duck.source["key_type"] == spark.source["key_type"] == "string"
    exact, sampled = duck.locality, spark.locality
    assert exact.method == "exact" and sampled.method == "shards"
    assert sampled.sample_rate == pytest.approx(1 / 3, rel=1e-6)
    assert sampled.keys == exact.keys  # Spark counted them all
    # the sample's own standard error bounds its distance from the exact curve (4 sd)
    assert 0 < sampled.expected_error < 0.1
    for share in (0.001, 0.01, 0.05, 0.2):
        size = share * exact.keys
        assert abs(sampled.lru_hit_rate(size) - exact.lru_hit_rate(size)) \
            <= 4 * sampled.expected_error, share
    for doc in (duck, spark):
        object.__setattr__(doc, "locality", None)
    assert comparable(duck) == comparable(spark)


@pytest.mark.slow
def test_a_short_trace_of_many_keys_is_measured_exactly_by_both_engines(tmp_path, monkeypatch):
    """2 M requests over ~1.6 M keys (past the 1 M keys of the exact pass on a long stream):
    both engines measure it exactly (``locality.exact_fits``), so their LRU curves are one
    curve, where two SHARDS samples of different hashes differed by their errors."""
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", JVM_OPTIONS)   # the same Spark, less JIT
    rng = np.random.default_rng(4)
    n = 2_000_000
    keys = np.where(rng.random(n) < 0.2, rng.zipf(1.2, n) % 5000,
                    5000 + rng.integers(0, 10**9, n))
    times = 1_714_560_000_000 + np.arange(n, dtype=np.int64) * 3
    path = tmp_path / "many.parquet"
    pq.write_table(pa.table({"k": keys, "t": times}), path)
    duck = count_profile([str(path)], key="k", time_col="t")
    spark = count_profile([str(path)], key="k", time_col="t", engine="spark",
                          spark_master="local[2]")
    assert duck.locality.keys > 1 << 20
    assert duck.locality.method == spark.locality.method == "exact"
    assert duck.locality.to_dict() == spark.locality.to_dict()
    assert duck.arrivals.to_dict() == spark.arrivals.to_dict()
    assert duck.timelines.to_dict() == spark.timelines.to_dict()
