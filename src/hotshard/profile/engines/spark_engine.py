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
from hotshard.profile.engine_io import (
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
    local = master.startswith("local") and not _submitted()
    if local:  # a local Spark binds its driver to loopback only
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark's pandas version notice
        spark = _builder(SparkSession, master, local).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _submitted() -> bool:
    """Whether this process was started by ``spark-submit`` (which set the master, the
    driver's address and its memory already: they are left as it set them)."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def _builder(session_cls, master: str, local: bool = True):
    builder = (session_cls.builder.appName("hotshard-profile")
               .config("spark.sql.session.timeZone", "UTC"))
    if not local:
        # spark-submit's master (or the one given) and the cluster's own settings
        return builder if _submitted() else builder.master(master)
    return (builder.master(master)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.driver.memory", "2g"))


def _read(spark, spec: CountSpec):
    if spec.fmt == "key_array":
        raise InputError("a JSON array of keys (generate --format k6) is read by the duckdb "
                         "engine: drop ${engine} spark, or generate csv-feeder or Parquet")
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


def count(spec: CountSpec, master: str = "local[*]", progress: Progress | None = None,
          session=None, scratch: str | None = None) -> RawCounts:
    """Count events per key (and per op) with Spark: on ``session`` when given (a
    ``SparkSession`` the caller built for its cluster, left running), else a session of its
    own at ``master``. ``scratch``: where the locality pass's sorted sample is written for
    the driver to read (a directory both the executors and the driver can reach; a local
    temporary one by default)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    spark = session if session is not None else _session(master)
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
        arrivals = timelines = locality = None
        if spec.time and not spec.counts:
            if progress:
                progress("measuring arrivals and timelines (spark)", None)
            arrivals, timelines = _time_sections(spark, df, spec, key, kc, overall.head_keys)
        events = int(tot["rows"] or 0) - int(tot["nulls"] or 0)
        if spec.locality and not spec.counts and events > 0:
            if progress:
                progress("measuring locality (spark)", None)
            locality = _locality(spark, df, spec, key, kc, events, int(kc.count()), scratch)
        return RawCounts(rows=int(tot["rows"] or 0), null_keys=int(tot["nulls"] or 0),
                         key_type=key_type, overall=overall, operations=operations,
                         size_quantiles=sizes, second_counts=second_counts, window=window,
                         placement=placement, arrivals=arrivals, timelines=timelines,
                         locality=locality)
    except PySparkException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"spark could not count the input: {first}") from None
    finally:
        if session is None:
            spark.stop()


def _per_second(df, spec: CountSpec):
    from pyspark.sql import functions as F

    from hotshard.profile.time_counts import FINE_S, fine_window

    t = F.col(spec.time)
    seconds = _time_sql(df, spec)
    # a second is a hundred 10 ms windows of the epoch, as the DuckDB engine counts it
    sec = F.floor(F.expr(fine_window(seconds)) / round(1 / FINE_S))
    finite = ~F.isnan(F.expr(seconds)) & (F.abs(F.expr(seconds)) != float("inf"))
    per_sec = df.where(t.isNotNull() & finite).groupBy(sec.cast("long").alias("sec")).agg(
        F.count(F.lit(1)).alias("c")).cache()
    bounds = per_sec.agg(F.min("sec").alias("lo"), F.max("sec").alias("hi")).collect()[0]
    if bounds["lo"] is None:
        return None, None
    coc = per_sec.groupBy("c").agg(F.count(F.lit(1)).alias("s")).orderBy("c").collect()
    return ((np.array([r["c"] for r in coc], dtype=np.int64),
             np.array([r["s"] for r in coc], dtype=np.int64)),
            (float(bounds["lo"]), float(bounds["hi"])))


def _time_sql(df, spec: CountSpec) -> str:
    """The --time column in seconds as a Spark SQL expression: the same double, operation for
    operation, as the DuckDB engine's (``duckdb_engine._time_seconds``), so both engines put
    every request in the same window."""
    from pyspark.sql import functions as F

    from hotshard.profile.time_units import seconds_per

    kind = _type_name(df, spec.time)
    col = "`" + spec.time.replace("`", "``") + "`"
    unit = getattr(spec, "time_unit", "auto")
    if kind in ("TimestampType", "TimestampNTZType", "DateType", "StringType"):
        if unit != "auto":
            raise InputError(f"${{time_unit}} is for numeric time columns; {spec.time!r} is a "
                             f"{kind}")
        if kind == "StringType":
            t = F.col(spec.time)
            bad = df.where(t.isNotNull() & t.try_cast("timestamp").isNull()).limit(1).collect()
            if bad:
                raise InputError(f"time column {spec.time!r} holds text that is not a "
                                 f"timestamp ({str(bad[0][spec.time])[:60]!r}): give ISO "
                                 "8601 times, epoch numbers, or a timestamp column")
        return f"(unix_micros(CAST({col} AS TIMESTAMP)) / 1e6)"
    if kind in _NUM_TYPES:
        low, high = df.agg(F.min(spec.time), F.max(spec.time)).collect()[0]
        scale = seconds_per(unit, None if low is None else float(low),
                            None if high is None else float(high), spec.time)
        per = round(1.0 / scale)
        if per == 1:
            return f"CAST({col} AS DOUBLE)"
        if per == 1_000_000_000 and kind in _INT_TYPES:
            return (f"(CAST({col} div 1000 AS DOUBLE) / 1e6 + CAST({col} % 1000 AS DOUBLE) "
                    "/ 1e9)")
        return f"(CAST({col} AS DOUBLE) / {float(per)!r}e0)"
    raise InputError(f"time column {spec.time!r} has type {kind}: it must be a timestamp, "
                     "ISO text, or numeric epoch time (s, ms, us or ns)")


class _Runner:
    """``time_counts.SqlRunner`` on a Spark session: tables are cached temporary views."""

    def __init__(self, spark):
        self.spark = spark
        self.cached = []

    def materialize(self, name: str, query: str) -> None:
        df = self.spark.sql(query).cache()
        df.createOrReplaceTempView(name)
        self.cached.append(df)

    def rows(self, query: str) -> list[tuple]:
        from decimal import Decimal

        return [tuple(int(v) if isinstance(v, Decimal) else v for v in row)
                for row in self.spark.sql(query).collect()]

    def close(self) -> None:
        for df in self.cached:
            df.unpersist()


def _time_sections(spark, df, spec: CountSpec, key, kc, head_keys: list[str]):
    """(arrivals, timelines) as Spark aggregations of ``profile.time_counts``' statements:
    the same counts as the DuckDB engine's."""
    from pyspark.sql import functions as F

    from hotshard.profile.time_counts import (
        EVENTS,
        time_sections,
        time_span,
    )
    from hotshard.profile.time_units import timestamp_tick

    t = F.expr(_time_sql(df, spec))
    events = (df.select(key.alias("k"), t.alias("t"))
              .where(F.col("k").isNotNull() & F.col("t").isNotNull() & ~F.isnan("t")
                     & (F.abs(F.col("t")) != float("inf"))))
    events.createOrReplaceTempView(EVENTS)
    run = _Runner(spark)
    try:
        span = time_span(run)
        if span is None:
            return None, None
        start, end, _ = span
        sample = [r[0] for r in events.select("t").limit(100_000).collect()]
        tick = timestamp_tick(np.asarray(sample))
        head = None
        if head_keys:
            names = spark.createDataFrame([(i, str(k)) for i, k in enumerate(head_keys)],
                                          "i long, name string")
            (kc.join(names, kc["k"].cast("string") == names["name"])
             .select("k", "i").createOrReplaceTempView("hs_head"))
            head = "hs_head"
        arrivals, timelines = time_sections(run, start, end, tick, head, len(head_keys))
        return arrivals, timelines
    finally:
        run.close()


# The references a Spark profile brings to its driver for the locality pass: all of them up
# to this many (then its locality is exact, the same as DuckDB's), else a SHARDS sample of
# the keys sized to bring about this many (and no more keys than the exact pass holds).
DRIVER_REFERENCES = 50_000_000
MIN_RATE = 1e-4   # a sample of fewer keys says little about a cache of any size


def _locality(spark, df, spec: CountSpec, key, kc, events: int, n_keys: int,
              scratch: str | None):
    """The locality section from Spark: the references of a spatially hashed sample of the
    keys (keys whose hash falls under the rate: SHARDS), sorted by time (ties in input order)
    in Spark, written to a scratch directory in order and read back by the driver in
    batches through ``StreamLocality``, the DuckDB engine's kernel."""
    import tempfile

    from pyspark.sql import functions as F

    from hotshard.profile.locality import EXACT_MAX_KEYS, StreamLocality, exact_fits

    # every reference while the driver takes them and the exact pass holds the keys (the
    # DuckDB engine's rule: the same trace measured the same way), else a sample of as many
    # references as the driver takes, as many keys as a pass follows
    if events <= DRIVER_REFERENCES and exact_fits(events, n_keys):
        rate = 1.0
    else:
        rate = min(1.0, DRIVER_REFERENCES / max(events, 1), EXACT_MAX_KEYS / max(n_keys, 1))
        rate = max(rate, MIN_RATE)
    threshold = max(int(rate * (1 << 24)), 1)
    h = F.xxhash64(F.col("k"))
    sampled = (h.bitwiseAND(F.lit(0xFFFFFF)) < threshold) if rate < 1 else F.lit(True)
    stream = df.select(key.alias("k"), F.monotonically_increasing_id().alias("rn"),
                       *([F.expr(_time_sql(df, spec)).alias("t")] if spec.time else []))
    stream = stream.where(F.col("k").isNotNull() & sampled)
    order = [F.col("t").asc_nulls_last(), F.col("rn")] if spec.time else [F.col("rn")]
    with tempfile.TemporaryDirectory(prefix="hotshard-spark-", dir=scratch) as tmp:
        keys_dir, refs_dir = os.path.join(tmp, "keys"), os.path.join(tmp, "refs")
        kc.where(sampled).select(h.alias("h"), F.col("n").cast("long").alias("n")) \
            .write.parquet(keys_dir)
        stream.orderBy(*order).select(h.alias("h")).write.parquet(refs_dir)
        pass_ = StreamLocality(_parquet_batches(keys_dir, ("h", "n")), events=events,
                               order=f"time:{spec.time}" if spec.time else "file",
                               sample_rate=rate, sampled_only=rate < 1, n_keys=n_keys)
        for (refs,) in _parquet_batches(refs_dir, ("h",)):
            pass_.feed(refs)
        return pass_.result()


def _parquet_batches(directory: str, columns: tuple[str, ...]):
    """The columns of the part files Spark wrote to ``directory``, in its order (a sorted
    write's parts are in sort order), as numpy arrays in batches."""
    import glob

    import pyarrow.parquet as pq

    for part in sorted(glob.glob(os.path.join(directory, "part-*.parquet"))):
        for batch in pq.ParquetFile(part).iter_batches(batch_size=1 << 20, columns=list(columns)):
            yield tuple(batch.column(c).to_numpy(zero_copy_only=False) for c in columns)


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
