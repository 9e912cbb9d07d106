"""Counting real traces into profiles: exact heads, totals that add up, nothing else leaks."""

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotshard.errors import InputError
from hotshard.profile.count import count_profile
from hotshard.profile.document import Profile
from tests.conftest import shared

TRACES = ["web07", "web12", "orm-busy", "scarab-recs", "corda-vault"]


def exact_counts(path, column="key"):
    keys = pq.read_table(path, columns=[column]).column(column).to_numpy()
    uniq, counts = np.unique(keys, return_counts=True)
    return uniq, counts


@pytest.mark.parametrize("trace", TRACES)
def test_head_exact_and_totals_add_up(trace):
    path = shared("traces", f"{trace}.parquet")
    uniq, counts = exact_counts(path)
    prof = count_profile([str(path)], key="key")
    assert prof.events == counts.sum()
    assert prof.keys == uniq.size
    # head: the top 500 by count, ties broken by key, counts exact
    order = np.lexsort((uniq, -counts))[:500]
    assert list(prof.head_keys) == [str(k) for k in uniq[order]]
    assert prof.head_counts.tolist() == counts[order].tolist()
    # tail: the exact count-of-counts of every key outside the head
    rest = np.delete(counts, order)
    tail_vals, tail_keys = np.unique(rest, return_counts=True)
    small = tail_vals <= 1024
    assert prof.tail.values.tolist() == tail_vals[small].tolist()
    assert prof.tail.value_keys.tolist() == tail_keys[small].tolist()
    assert prof.tail.keys == rest.size
    assert prof.tail.events == rest.sum()
    assert prof.source["key_type"] == "int64"


def test_cloudphysics_ops_sizes_and_rate():
    path = shared("traces", "cloudphysics.parquet")
    table = pq.read_table(path)
    lbn = table.column("lbn").to_numpy()
    op = np.array(table.column("op").cast("string").to_pylist())
    size = table.column("size").to_numpy()
    prof = count_profile([str(path)], key="lbn", op="op", size="size", time_col="time")
    assert prof.events == len(lbn)
    for name, dist in prof.operations.items():
        sub = lbn[op == name]
        keys, counts = np.unique(sub, return_counts=True)
        assert dist.events == sub.size
        assert dist.keys == keys.size
        assert dist.head_counts[0] == counts.max()
    assert set(prof.operations) == set(np.unique(op))
    q = np.quantile(size, [0.5, 0.9, 0.99])  # linear interpolation, as quantile_cont
    assert [prof.sizes["quantiles"][k] for k in ("0.5", "0.9", "0.99")] == pytest.approx(q)
    sec = np.floor(table.column("time").to_numpy()).astype(np.int64)
    per_second = np.bincount(sec - sec.min())
    assert prof.rate["peak_rps"] == per_second.max()
    assert prof.rate["mean_rps"] == pytest.approx(len(lbn) / per_second.size)
    assert prof.rate["p99_rps"] == np.sort(per_second)[int(np.ceil(0.99 * per_second.size)) - 1]


def test_only_key_and_counts_leave(tmp_path):
    rng = np.random.default_rng(1)
    n = 5000
    keys = rng.zipf(2.0, n) % 300
    table = pa.table({
        "channel_id": keys,
        "user_id": [f"SECRET-USER-{i}" for i in range(n)],
        "content": [f"SECRET-MESSAGE-{i}" for i in range(n)],
    })
    pq.write_table(table, tmp_path / "events.parquet")
    prof = count_profile([str(tmp_path / "events.parquet")], key="channel_id")
    text = prof.to_json()
    assert "SECRET" not in text
    assert prof.events == n


def test_formats_and_globs_agree(tmp_path):
    rng = np.random.default_rng(2)
    keys = (rng.zipf(1.8, 4000) % 500).astype(str)
    keys = np.char.add("ch-", keys)
    pq.write_table(pa.table({"k": keys[:2000]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"k": keys[2000:]}), tmp_path / "b.parquet")
    (tmp_path / "all.csv").write_text("k,other\n" + "".join(f"{k},x\n" for k in keys))
    with gzip.open(tmp_path / "all.csv.gz", "wt") as fh:
        fh.write("k\n" + "".join(f"{k}\n" for k in keys))
    (tmp_path / "all.jsonl").write_text("".join(json.dumps({"k": k}) + "\n" for k in keys))
    profiles = [count_profile([str(tmp_path / "*.parquet")], key="k")] + [
        count_profile([str(tmp_path / name)], key="k")
        for name in ("all.csv", "all.csv.gz", "all.jsonl")]
    dicts = [p.dist.to_dict() for p in profiles]
    assert all(d == dicts[0] for d in dicts)
    assert profiles[0].source["key_type"] == "string"


def test_preaggregated_counts_sum_duplicates(tmp_path):
    (tmp_path / "c.csv").write_text("channel,n\na,10\nb,3\na,5\nc,1\n")
    prof = count_profile([str(tmp_path / "c.csv")], key="channel", counts="n")
    assert list(prof.head_keys) == ["a", "b", "c"]
    assert prof.head_counts.tolist() == [15, 3, 1]
    assert prof.events == 19


def test_min_count_privacy_floor(tmp_path):
    (tmp_path / "c.csv").write_text("k,n\nbig,100\nmid,20\nrare,2\nrarer,1\n")
    prof = count_profile([str(tmp_path / "c.csv")], key="k", counts="n", min_count=10)
    assert list(prof.head_keys) == ["big", "mid"]
    assert "rare" not in prof.to_json()
    assert prof.events == 123 and prof.keys == 4  # the rare keys still count, as tail mass


def test_profile_stays_small_for_a_huge_key_space(tmp_path):
    rng = np.random.default_rng(3)
    counts = np.minimum(rng.zipf(1.6, 400_000), 10**9)  # many distinct count values
    pq.write_table(pa.table({"k": np.arange(counts.size), "n": counts}), tmp_path / "c.parquet")
    prof = count_profile([str(tmp_path / "c.parquet")], key="k", counts="n")
    assert len(prof.to_json()) < 100_000
    assert prof.events == counts.sum()
    assert Profile.from_dict(json.loads(prof.to_json())).events == counts.sum()


@pytest.mark.parametrize(
    ("make", "kwargs", "message"),
    [
        (None, {"inputs": ["missing.parquet"]}, "no such file"),
        (None, {"inputs": ["*.nothing"]}, "no files match"),
        ("dir", {}, "is a directory"),
        ("empty", {}, "is empty"),
        ("csv", {"key": "nope"}, "no column 'nope'"),
        ("csv", {"counts": "label"}, "non-numeric values such as 'x'"),
        ("negative", {"counts": "n"}, "negative count"),
        ("truncated", {}, "cannot count"),
        ("header_only", {}, "no events"),
        ("csv", {"engine": "oracle"}, "unknown engine"),
        ("csv", {"counts": "k"}, "the key and counts columns are both 'k': the key, counts, "
                                 "op, size and time columns must each be a different one"),
        ("csv", {"op": "label", "size": "label"}, "the op and size columns are both 'label'"),
        ("csv", {"time_col": "k"}, "the key and time columns are both 'k'"),
    ],
)
def test_bad_input(tmp_path, monkeypatch, make, kwargs, message):
    monkeypatch.chdir(tmp_path)
    target = "in.csv"
    if make == "dir":
        (tmp_path / "d").mkdir()
        target = "d"
    elif make == "empty":
        (tmp_path / "in.csv").write_text("")
    elif make == "csv":
        (tmp_path / "in.csv").write_text("k,label,n\na,x,1\nb,y,2\n")
    elif make == "negative":
        (tmp_path / "in.csv").write_text("k,n\na,4\nb,-2\n")
    elif make == "truncated":
        pq.write_table(pa.table({"k": np.arange(10_000)}), tmp_path / "t.parquet")
        (tmp_path / "t.parquet").write_bytes((tmp_path / "t.parquet").read_bytes()[:3000])
        target = "t.parquet"
    elif make == "header_only":
        (tmp_path / "in.csv").write_text("k,n\n")
    args = {"inputs": [target], "key": "k", **kwargs}
    with pytest.raises(InputError, match=message):
        count_profile(args.pop("inputs"), **args)


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("NaN", r"holds a NaN value \(NaN\) at line 4 of .*c\.csv"),
        ("1e30", r"holds a count of 2\^53 or more \(1e30\) at line 4 of .*c\.csv"),
        ("-2", r"holds a negative count \(-2\) at line 4 of .*c\.csv"),
        ("2.5", r"holds a fractional count \(2\.5\) at line 4 of .*c\.csv"),
        ("inf", r"holds an infinite count \(inf\) at line 4 of .*c\.csv"),
        ("", r"holds an empty cell at line 4 of .*c\.csv"),
    ],
)
def test_bad_counts_cell_named_with_its_line(tmp_path, cell, message):
    (tmp_path / "c.csv").write_text(f"k,n\na,4\nb,1\nc,{cell}\nd,2\n")
    with pytest.raises(InputError, match=message) as err:
        count_profile([str(tmp_path / "c.csv")], key="k", counts="n")
    assert "counts column 'n'" in str(err.value) and "--" not in str(err.value)


def test_bad_count_after_the_type_sample_is_not_rounded(tmp_path):
    # DuckDB types CSV/JSON columns from a sample; a late 2.5 must not become 3 (or 2)
    rows = [f"{i % 50},{'2.5' if i == 30_000 else 1}" for i in range(40_000)]
    (tmp_path / "c.csv").write_text("k,n\n" + "\n".join(rows) + "\n")
    (tmp_path / "c.jsonl").write_text("".join(
        json.dumps({"k": int(k), "n": float(n) if "." in n else int(n)}) + "\n"
        for k, n in (r.split(",") for r in rows)))
    for name, line in (("c.csv", "30,002"), ("c.jsonl", "30,001")):  # the CSV's header
        with pytest.raises(InputError, match=rf"fractional count \(2\.5\) at line {line} of"):
            count_profile([str(tmp_path / name)], key="k", counts="n")


def test_bad_counts_in_parquet_and_in_a_second_file(tmp_path):
    pq.write_table(pa.table({"k": ["a", "b", "c"], "n": [1.0, 2.0, float("nan")]}),
                   tmp_path / "a.parquet")
    with pytest.raises(InputError, match=r"NaN value \(nan\) at row 3 of .*a\.parquet"):
        count_profile([str(tmp_path / "a.parquet")], key="k", counts="n")
    (tmp_path / "ok.csv").write_text("k,n\na,1\n")
    (tmp_path / "bad.csv").write_text("k,n\na,1\nb,1\nc,-1\nd,-5\n")
    with pytest.raises(InputError, match=r"\(-1\) at line 4 of .*bad\.csv \(2 bad cells"):
        count_profile([str(tmp_path / "ok.csv"), str(tmp_path / "bad.csv")], key="k",
                      counts="n")


def test_a_key_total_beyond_2_53_is_refused(tmp_path):
    # 2^52 + (2^52 + 1) is 2^53 + 1, which a double sum reads as 2^53: refused all the same
    for n in ([2**52, 2**52 + 1, 3], [2**52, 2**52, 3]):
        pq.write_table(pa.table({"k": ["a", "a", "b"], "n": n}), tmp_path / "c.parquet")
        with pytest.raises(InputError, match="for key 'a' add up to 9,007,199,254,740,99"):
            count_profile([str(tmp_path / "c.parquet")], key="k", counts="n")
    (tmp_path / "c.csv").write_text("k,n\na,4503599627370496\na,4503599627370497\n")
    with pytest.raises(InputError, match="for key 'a' add up to .* 2\\^53 or more"):
        count_profile([str(tmp_path / "c.csv")], key="k", counts="n")


def test_non_numeric_counts_type_is_refused(tmp_path):
    pq.write_table(pa.table({"k": ["a", "b"], "n": [True, False]}), tmp_path / "c.parquet")
    with pytest.raises(InputError, match="counts column 'n' has type BOOLEAN"):
        count_profile([str(tmp_path / "c.parquet")], key="k", counts="n")


@pytest.mark.parametrize("counts", [None, "n"])
def test_empty_and_null_keys_are_dropped_and_counted(tmp_path, counts):
    pq.write_table(pa.table({"k": ["a", "", None, "b", "", "a"], "n": [5, 1, 2, 3, 4, 1]}),
                   tmp_path / "e.parquet")
    (tmp_path / "e.csv").write_text('k,n\na,5\n,1\n"",2\nb,3\n,4\na,1\n')
    (tmp_path / "e.jsonl").write_text(
        '{"k":"a","n":5}\n{"k":"","n":1}\n{"k":null,"n":2}\n{"k":"b","n":3}\n{"n":4}\n'
        '{"k":"a","n":1}\n')
    for name in ("e.parquet", "e.csv", "e.jsonl"):
        prof = count_profile([str(tmp_path / name)], key="k", counts=counts)
        assert list(prof.head_keys) == ["a", "b"], name
        assert prof.source["null_keys"] == 3, name  # rows, not events
        assert prof.source["rows"] == 6, name
        assert prof.events == (9 if counts else 3), name
