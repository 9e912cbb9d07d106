"""Spark and DuckDB give the same profile on the same data (Spark local[2], for real)."""

import pytest

from hotshard.profile.count import count_profile
from tests.conftest import shared

pytest.importorskip("pyspark")


def comparable(profile):
    """The profile but what differs by engine: when and how it was made, and the sections of
    the ordered stream (locality, arrivals, timelines), which only DuckDB's ordered read
    measures."""
    doc = profile.to_dict()
    doc["source"].pop("created")
    doc["source"].pop("engine")
    for section in ("locality", "arrivals", "timelines"):
        doc.pop(section, None)
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
    assert comparable(duck) == comparable(spark)
    assert duck.locality is not None and spark.locality is None
    assert duck.arrivals is not None and spark.arrivals is None

    table = pq.read_table(shared("traces", "scarab-recs.parquet"))
    csv = tmp_path / "scarab.csv"
    keys = table.column("key").to_numpy()[:300_000]
    # epoch milliseconds (a JSON log's times): both engines read the unit from the values
    csv.write_text("key,t\n" + "\n".join(f"item-{k},{1_714_560_000_000 + 7 * i}"
                                         for i, k in enumerate(keys)) + "\n")
    duck = count_profile([str(csv)], key="key", time_col="t")
    spark = count_profile([str(csv)], key="key", time_col="t", engine="spark",
                          spark_master="local[2]")
    assert duck.rate["seconds"] == spark.rate["seconds"] == 2100  # 300,000 x 7 ms
    assert duck.source["key_type"] == spark.source["key_type"] == "string"
    assert comparable(duck) == comparable(spark)
