"""Apache Spark engine: the same aggregates as the DuckDB engine, for data beyond one machine.

Per-key counts stay distributed; only the head (top K), the count-of-counts and a few totals are
collected to the driver. Quantiles use Spark's exact ``percentile`` (linear interpolation, as
DuckDB's ``quantile_cont``) so both engines give the same profile.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from hotshard.errors import InputError
from hotshard.profile.counting import (
    MAX_COUNT,
    SIZE_QUANTILES,
    CountSpec,
    Progress,
    RawCounts,
    RawDist,
    accumulate_placement,
    bad_count_error,
    check_key_total,
)

_INT_TYPES = {"ByteType", "ShortType", "IntegerType", "LongType"}
_NUM_TYPES = _INT_TYPES | {"FloatType", "DoubleType", "DecimalType"}


def _session(master: str):
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError("the Spark engine needs pyspark: pip install 'hotshard[spark]'") from None
    # a local Spark binds its driver to loopback only
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark's pandas version notice
        spark = _builder(SparkSession, master).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _builder(session_cls, master: str):
    return (session_cls.builder.master(master).appName("hotshard-profile")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", "2g"))


def _read(spark, spec: CountSpec):
    if spec.fmt == "key_array":
        raise InputError("a JSON array of keys (generate --format k6) is read by the duckdb "
                         "engine: drop --engine spark, or generate csv-feeder or Parquet")
    reader = spark.read
    if spec.fmt == "parquet":
        return reader.parquet(*spec.files)
    if spec.fmt == "csv":
        delim = "\t" if any(".tsv" in f for f in spec.files) else ","
        return reader.csv(list(spec.files), header=True, inferSchema=True, sep=delim)
    return reader.json(list(spec.files))


def _dist(kc, spec: CountSpec) -> RawDist:
    from pyspark.sql import functions as F

    head = (kc.where(F.col("n") >= spec.min_count)
            .orderBy(F.col("n").desc(), F.col("k").asc()).limit(spec.top_k)
            .select(F.col("k").cast("string").alias("k"), "n").collect())
    coc = kc.groupBy("n").agg(F.count(F.lit(1)).alias("c")).orderBy("n").collect()
    return RawDist(
        head_keys=[r["k"] for r in head],
        head_counts=[int(r["n"]) for r in head],
        coc_values=np.array([r["n"] for r in coc], dtype=np.int64),
        coc_keys=np.array([r["c"] for r in coc], dtype=np.int64),
    )


def _type_name(df, col: str) -> str:
    return type(df.schema[col].dataType).__name__


def _counts_value(df, spec: CountSpec):
    """The counts column as a double; every cell a whole number in [0, 2^53) or an error."""
    from pyspark.sql import functions as F

    c = F.col(spec.counts)
    kind = _type_name(df, spec.counts)
    if kind in _NUM_TYPES:
        value = c.cast("double")
    elif kind == "StringType":
        value = c.try_cast("double")
    else:
        raise InputError(f"counts column {spec.counts!r} has type {kind}: it must hold numbers")
    # NaN and infinities first: NaN % 1 is NaN, and NaN != 0 holds in Spark
    bad = (c.isNull() | value.isNull() | F.isnan(value) | (value < 0)
           | (value >= float(MAX_COUNT)) | (value % 1 != 0))
    n_bad = df.where(bad).count()
    if n_bad:
        # Spark keeps no row order: name the file of one bad cell, not its row
        cell = df.where(bad).select(F.input_file_name().alias("f"),
                                    c.cast("string").alias("v")).first()
        raise bad_count_error(spec.counts, cell["v"], bad_cells=n_bad,
                              file=_local_path(cell["f"]) or None)
    return value


def _local_path(uri: str | None) -> str:
    """A file:// URI as the path the user typed (other URIs unchanged)."""
    if not uri:
        return ""
    if uri.startswith("file:"):
        from urllib.parse import unquote, urlparse

        return unquote(urlparse(uri).path)
    return uri


def count(spec: CountSpec, master: str = "local[*]",
          progress: Progress | None = None) -> RawCounts:
    """Count events per key (and per op) with Spark."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    spark = _session(master)
    try:
        if progress:
            progress("counting events per key (spark)", None)
        df = _read(spark, spec)
        missing = [c for c in spec.columns() if c not in df.columns]
        if missing:
            raise InputError(f"no column {missing[0]!r} in the input; its columns are: "
                             f"{', '.join(df.columns)}")
        if spec.size and _type_name(df, spec.size) not in _NUM_TYPES:
            raise InputError(f"size column {spec.size!r} holds non-numeric values")
        # counts stay doubles (exact to 2^53) until every key's total is known to fit
        n_expr = (F.sum(_counts_value(df, spec)) if spec.counts
                  else F.count(F.lit(1)).cast("long"))
        key = F.col(spec.key)
        if _type_name(df, spec.key) == "StringType":
            key = F.when(key == "", F.lit(None)).otherwise(key)  # empty key: dropped, counted
        groups = [key.alias("k")]
        if spec.op:
            groups.insert(0, F.col(spec.op).cast("string").alias("o"))
        kco = (df.groupBy(*groups).agg(n_expr.alias("n"),
                                        F.count(F.lit(1)).alias("r")).cache())
        kc_all = kco.groupBy("k").agg(F.sum("n").alias("n"), F.sum("r").alias("r")) if spec.op \
            else kco
        named = F.col("k").isNotNull()
        tot = kc_all.agg(F.sum("r").alias("rows"),
                         F.sum(F.when(~named, F.col("r"))).alias("nulls"),
                         F.max_by(F.when(named, F.col("k")), F.when(named, F.col("n")))
                         .alias("top_key"),
                         F.max(F.when(named, F.col("n"))).alias("top_n")).collect()[0]
        if spec.counts:
            check_key_total(spec.counts, tot["top_key"], tot["top_n"])
        kc = kc_all.where(F.col("k").isNotNull() & (F.col("n") > 0)).cache()
        overall = _dist(kc, spec)
        operations = {}
        if spec.op:
            valid = kco.where(F.col("k").isNotNull() & F.col("o").isNotNull() & (F.col("n") > 0))
            ops = sorted(r["o"] for r in valid.select("o").distinct().collect())
            for o in ops:
                operations[o] = _dist(valid.where(F.col("o") == o), spec)
        sizes = None
        if spec.size:
            qs = ", ".join(str(q) for q in SIZE_QUANTILES)
            vals = df.selectExpr(f"percentile(`{spec.size}`, array({qs})) AS q").collect()[0]["q"]
            if vals is not None:
                sizes = {str(q): float(v) for q, v in zip(SIZE_QUANTILES, vals, strict=True)}
        second_counts = window = None
        if spec.time:
            second_counts, window = _per_second(df, spec)
        key_type = "int64" if _type_name(df, spec.key) in _INT_TYPES else "string"
        placement = {}
        if spec.placements:
            rows = kc.select(F.col("k").cast("string").alias("k"), "n").toLocalIterator()
            placement = accumulate_placement(_batches(rows), overall.head_keys, spec.placements)
        return RawCounts(rows=int(tot["rows"] or 0), null_keys=int(tot["nulls"] or 0),
                         key_type=key_type, overall=overall, operations=operations,
                         size_quantiles=sizes, second_counts=second_counts, window=window,
                         placement=placement)
    except PySparkException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"spark could not count the input: {first}") from None
    finally:
        spark.stop()


def _per_second(df, spec: CountSpec):
    from pyspark.sql import functions as F

    from hotshard.profile.time_units import seconds_per

    kind = _type_name(df, spec.time)
    t = F.col(spec.time)
    unit = getattr(spec, "time_unit", "auto")
    if kind in ("TimestampType", "TimestampNTZType", "DateType", "StringType"):
        if unit != "auto":
            raise InputError(f"--time-unit is for numeric time columns; {spec.time!r} is a "
                             f"{kind}")
        if kind == "StringType":
            bad = df.where(t.isNotNull() & t.cast("timestamp").isNull()).limit(1).collect()
            if bad:
                raise InputError(f"time column {spec.time!r} holds text that is not a "
                                 f"timestamp ({str(bad[0][spec.time])[:60]!r}): give ISO "
                                 "8601 times, epoch numbers, or a timestamp column")
        sec = F.floor(F.unix_timestamp(t.cast("timestamp")))
    elif kind in _NUM_TYPES or kind == "DecimalType":
        low, high = df.agg(F.min(t), F.max(t)).collect()[0]
        scale = seconds_per(unit, None if low is None else float(low),
                            None if high is None else float(high), spec.time)
        sec = F.floor(t.cast("double") * F.lit(scale))
    else:
        raise InputError(f"time column {spec.time!r} has type {kind}: it must be a timestamp, "
                         "ISO text, or numeric epoch time (s, ms, us or ns)")
    per_sec = df.where(t.isNotNull()).groupBy(sec.cast("long").alias("sec")).agg(
        F.count(F.lit(1)).alias("c")).cache()
    bounds = per_sec.agg(F.min("sec").alias("lo"), F.max("sec").alias("hi")).collect()[0]
    if bounds["lo"] is None:
        return None, None
    coc = per_sec.groupBy("c").agg(F.count(F.lit(1)).alias("s")).orderBy("c").collect()
    return ((np.array([r["c"] for r in coc], dtype=np.int64),
             np.array([r["s"] for r in coc], dtype=np.int64)),
            (float(bounds["lo"]), float(bounds["hi"])))


def _batches(rows, size: int = 1 << 16):
    keys, counts = [], []
    for r in rows:
        keys.append(r["k"])
        counts.append(r["n"])
        if len(keys) >= size:
            yield keys, counts
            keys, counts = [], []
    if keys:
        yield keys, counts
