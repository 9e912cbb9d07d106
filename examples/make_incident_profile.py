"""Make the incident's example profiles from the shape the incident describes.

    python examples/make_incident_profile.py [--out-dir src/hotshard/data] [--seed 2026]

(``--out-dir`` defaults to the package's data directory, ``src/hotshard/data``, wherever it is
run from: the profiles are package data, so ``hotshard simulate --scenario ...`` works from an
installed wheel; ``examples/`` holds links to them)

writes two ``hotshard.profile/1`` documents (counts only, well under 100 KB each):

``incident.profile.json``
    One hour of a live-streaming platform's chat-history service at the incident's production
    rate (3000 req/s): integer channel IDs, the top 1% of channels carrying half of all
    requests, a power-law tail, reads and writes, message sizes, the per-second rate, and the
    hour's time sections (``locality``, ``arrivals``, ``timelines``) measured from its requests
    laid out in time.
``incident-event.profile.json``
    The same hour, the same channels and the same rate, while one channel hosts a big event
    and carries ``EVENT_SHARE`` of all requests alone (its ``timelines`` show it hot in the
    event's windows).

The model
---------
Popularity is Zipf's law, the discrete power law in rank form: the channel of popularity rank
``r`` (1 = most popular) of ``N_CHANNELS`` draws an expected share ``r**-s / H(N, s)`` of the
requests, ``H(n, s) = sum(k**-s for k in 1..n)``. The top 1% of channels then carries
``H(N/100, s) / H(N, s)``, which rises monotonically with ``s``; the script *solves* that
equation for ``s`` (scipy's brentq on the exact finite sums, so the finite number of channels
is taken into account; no trial and error). In the distribution of per-channel counts the same
law reads ``P(count >= k) ~ k**-(alpha - 1)`` with ``alpha = 1 + 1/s``: a discrete power-law
tail, which ``hotshard profile``'s maximum-likelihood fit recovers (the script prints both).

The hour's ``TOTAL_REQUESTS`` are then dealt to the channels by one multinomial draw with those
shares (the Poisson-like noise real counts have), each request is a read or a write
independently with ``WRITE_FRACTION``, and the rows ``(channel_id, op, n)`` go through
``hotshard.profile.count.count_profile`` exactly as a user's pre-aggregated counts would.
Payload sizes and the per-second rate cannot come from a counts table, so the script adds them
to the profile (``sizes`` and ``rate``, the fields ``count_profile`` fills from event rows) and
re-validates it through ``Profile.from_dict`` before saving.

The event variant keeps the total: the event channel's requests become ``EVENT_SHARE`` of the
hour, and the other channels' requests are thinned at random to the rest (a multivariate
hypergeometric draw over their (channel, op) cells: viewers who left their channel for the
event), so both files describe 3000 req/s and differ only in where the requests go.

When the requests come: the hour's request instants are drawn from the rate's named swings and
waves (``arrival_times``), and each channel's requests are placed in one live session of the
hour, longer for larger channels (``session_spans``: the popular channels are live all hour);
the event channel's follow ``EVENT_AUDIENCE``, while the others' thin out as it draws their
viewers. That stream of (channel, instant), in time order, is measured as ``hotshard profile
--time`` measures event rows (``measure_locality``, ``measure_arrivals``,
``measure_timelines``, the DuckDB engine's calls): the profiles' ``locality``, ``arrivals`` and
``timelines`` are what the library finds in it, not numbers written here.

Every random part has its own stream spawned from ``--seed``, so the same seed gives
byte-identical files (the test checks the committed files are what this script makes), and the
profiles' ``source.created`` is the fixed end of the window, not the wall clock.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.signal import lfilter

from hotshard.profile.arrivals import ArrivalModel
from hotshard.profile.count import count_profile
from hotshard.profile.document import Profile
from hotshard.profile.time_counts import measure_arrivals

# --- parameters: each value is a choice, and the comment says why ------------------------------

# Default seed (the year of the incident write-up); any seed gives the same shape.
SEED = 2026

# The window a profile covers: one hour. Long enough to rank channels by their traffic (the
# median channel expects about 9 requests), short enough that the rate is roughly stationary and a
# big event (which lasts hours) fills it.
WINDOW_SECONDS = 3600
# Start of that window, fixed so the output is reproducible: an evening, when big events air.
WINDOW_START = datetime(2026, 12, 2, 20, 0, 0, tzinfo=UTC)

# Production's mean request rate in the incident ("in production, at only 3000 req/s").
MEAN_RPS = 3000
# Requests in the window: 3000 req/s for one hour = 10,800,000.
TOTAL_REQUESTS = MEAN_RPS * WINDOW_SECONDS

# Channels with chat-history traffic in the hour. The largest platform shows on the order of
# 100,000 channels live at any moment (public trackers such as TwitchTracker); over an hour,
# streams that start and stop and recently ended ones whose history is still read (offline
# channel pages, VOD chat replay) add more. A service taking 3000 req/s is smaller than that
# platform's, so 300,000 channels, an average of 36 requests each, sits in the middle of the
# plausible range (a few hundred thousand to a few million). At this size almost every channel
# gets at least one request (the least popular expects about 5), and the hour's 10.8 M
# requests laid out in time fit in memory (the script takes ~30 s and ~1.2 GB).
N_CHANNELS = 300_000

# The incident: "the top 1% of channels carries about half the viewing". The Zipf exponent is
# solved so that the top TOP_FRACTION of channels carries exactly TOP_SHARE of the expected
# requests.
TOP_FRACTION = 0.01
TOP_SHARE = 0.5

# Channel IDs are integers drawn without replacement from 1..CHANNEL_ID_MAX: nine-digit numeric
# IDs, the size large platforms issue (accounts number up to about a billion). Popularity does
# not depend on the ID, so no partitioner sees an accidental order.
CHANNEL_ID_MAX = 1_000_000_000

# Share of requests that are writes (a message posted); the rest are reads. A message is written
# once, but its history page is read by every viewer who opens the channel, reconnects (often,
# on mobile) or scrolls back, and by VOD chat replay; new messages reach live viewers over
# pub/sub, not this service. So reads dominate: 90% reads, 10% writes, the mix hotshard assumes
# when a profile records none (hotshard.profile.document.DEFAULT_OPS), kept the same for every
# channel so that the read and write distributions have the overall shape.
WRITE_FRACTION = 0.1
OPERATIONS = ("read", "write")

# Payload size of one stored chat message, in bytes: metadata plus text.
# Metadata: message, channel and user IDs and the timestamp (4 x 8 bytes), the sender's display
# name (~15), badges, colour and emote ranges (~35) and the serialisation's field names and
# framing (~28): about 110 bytes on every message.
MESSAGE_METADATA_BYTES = 110
# Text bytes by quantile: the median chat line is a few words or an emote code (~40 bytes); one
# in ten is a full sentence or two (~240); one in a hundred is a copy-paste near the usual
# 500-character cap, with multi-byte UTF-8 (emoji, CJK) taking it to ~900 bytes.
MESSAGE_TEXT_BYTES = {"0.5": 40, "0.9": 240, "0.99": 900}

# Per-second rate: Poisson noise alone would put the p99 second only ~4% above the mean, but
# chat traffic swings with shared moments (a stream starting, a raid, a goal, viewers rejoining
# after a hiccup). The script models the per-second rate as MEAN_RPS * exp(RATE_LOG_SD * x_t),
# renormalised, with x_t a unit-variance AR(1) process whose correlation decays over
# RATE_CORRELATION_SECONDS, and deals TOTAL_REQUESTS to the seconds by that rate.
# How large those swings were is read off the incident itself: the hot shard sat at 95% CPU over
# the hour with a p99 of 800 ms. A shard at 95% is saturated by any minute 5% busier than the
# mean, and a saturated minute backs its queue up by seconds (the simulator shows p99s of tens
# of seconds with one-sigma swings of 15%), so production's hour was steady at the minute
# scale: a log-standard deviation of 0.02 (swings of about 2%). Its busy seconds came from the
# waves below, which put the p99 second about 1.25x the mean: still below the 5000 req/s at
# which the incident's load test passed, so that (as in the incident) the rate alone cannot
# explain production's 800 ms p99; the keys do.
RATE_LOG_SD = 0.02
# Swings last about a minute: the time for a crowd to arrive at, or leave, a moment.
RATE_CORRELATION_SECONDS = 60.0

# Inside the minute-scale swings, live chat reacts to the stream in waves (a goal, a joke, a
# streamer's call to action): 30% of the time the rate runs 20% above its mean, in cycles of
# about 5 s (an on/off Markov-modulated process: spells of each state drawn exponential with
# means WAVE_ON_FRACTION x WAVE_CYCLE_SECONDS and the rest of the cycle). A load generator's
# requests are Poisson; this burstiness is what turns a 95%-busy shard's ~90 ms queue into
# ~800 ms at p99 (Kingman: the wait scales with the arrivals' variability at the same
# utilisation). The script builds the rate at ARRIVAL_CELL_SECONDS resolution (the profile's
# finest burstiness scale), deals TOTAL_REQUESTS to the cells, spreads each cell's requests
# uniformly in it, and measures the timestamps as ``hotshard profile --time`` does: the
# profile's ``arrivals`` section (per-minute counts, index of dispersion from 10 ms to 1 h, the
# fitted cascade) is what `hotshard simulate --scenario incident-production` replays.
WAVE_BURST = 1.2
WAVE_ON_FRACTION = 0.3
WAVE_CYCLE_SECONDS = 5.0
ARRIVAL_CELL_SECONDS = 0.01

# The event: one channel carries this share of all requests in the hour, alone. Record
# single-channel events (a charity boxing night, an esports final) have drawn over 3 million
# concurrent viewers against a platform-wide audience of several million: a third to a half of
# everyone watching at the peak. Averaged over an hour that includes the ramp up and down, 30%.
EVENT_SHARE = 0.30
# Which channel hosts it, by its everyday popularity rank: big events air on established, popular
# channels, though rarely the single most popular one. Rank 20 is in the profile's head on an
# ordinary day too, and is a different key (so usually on another shard) from the everyday top
# channel, which stays hot during the event as well.
EVENT_CHANNEL_RANK = 20
# When the event's audience is there, by 5-minute window of the hour (the profile's 12 timeline
# windows), relative to its peak: viewers arrive over the first quarter hour before the main
# card, stay through it, and drift away after. Scaled so that the hour's average is EVENT_SHARE
# (the peak windows then carry ~45%); the other channels lose what the event takes, window by
# window. The event profile's ``timelines`` section records it, so the event channel is hot
# when it was hot, not a steady 30% all hour.
EVENT_AUDIENCE = (0.15, 0.45, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.6, 0.35, 0.2)

# When each channel's requests come. Chat history is read while a channel is live (viewers who
# open it, reconnect or scroll back), so a channel's requests come in one contiguous session
# of the hour, not spread over all of it, and the session is longer the larger the audience:
# the popular channels stream for hours and viewers arrive at them all the time, so they are
# live the whole hour; a small channel's few requests come while its handful of viewers is
# there (a short stream, one that starts or ends in the hour, a raid that passes through).
# A channel with n requests gets a session of
#     hour x min(1, (n / FULL_HOUR_REQUESTS) ** SESSION_EXPONENT)
# at a uniformly random place on the hour taken as a circle (a session that runs past its end
# goes on at its start: the hour is a slice of a steady evening, so every minute of it sees the
# same mix of channels, with no edge effect), and its requests at uniform instants in it.
# A channel with a request a second on average (3,600 in the hour: the top ~200 channels,
# each with thousands of viewers) is live all hour; so are the channels that make the hot
# shard, which the incident saw at 95% all hour, not in spells.
FULL_HOUR_REQUESTS = 3600
# Ten times the requests, twice the session (10 ** SESSION_EXPONENT = 2): a larger channel is
# both watched longer and more densely. The median channel (~9 requests) is then live for about
# ten minutes and about 56,000 channels are live at an average moment (the script prints both),
# against the largest platform's ~100,000 for a service a fraction of its size.
SESSION_EXPONENT = math.log10(2)
# The request instants: the k-th request in session time (each channel's sessions and instants
# as above) is served at the k-th of the hour's arrivals (``arrival_times``), so every channel's
# requests lie in its session, read on the arrivals' clock (within ~2% of the wall clock), and
# the hour's waves are shared by the channels live at the moment. The event channel's requests
# come by EVENT_AUDIENCE, uniform in each window; every other channel's session runs on a clock
# that slows while the event draws its audience away (its density in window w is the share the
# event leaves of w), so each window keeps the hour's traffic and the event its share of it.
# The stream's time column, as the locality section records its order (``time:<column>``).
TIME_COLUMN = "ts"

# Head size: channels kept by name with exact counts (hotshard profile's default --top-k).
TOP_K = 500
# Privacy floor (hotshard profile's --min-count): the channels here are synthetic, so nothing is
# withheld; 1 keeps every head channel.
MIN_COUNT = 1

# Output file names (in --out-dir).
EVERYDAY_FILE = "incident.profile.json"
EVENT_FILE = "incident-event.profile.json"

# Where the script lives: examples/.
HERE = Path(__file__).resolve().parent
# Where the profiles go: the package's data (hotshard.sim.scenarios reads them from there).
DATA = HERE.parent / "src" / "hotshard" / "data"

# Independent random streams spawned from the seed, one per random part, so changing one part
# never shifts another's draws.
_STREAMS = ("channel_ids", "requests", "operations", "event", "rate", "sessions",
            "everyday_instants", "event_instants")


# --- the model ----------------------------------------------------------------------------------

def _harmonic(n: int, s: float) -> float:
    """H(n, s) = sum of k**-s for k = 1..n, computed exactly (n is a few hundred thousand)."""
    return float(np.sum(np.arange(1, n + 1, dtype=np.float64) ** -s))


def top_share(n: int, s: float, fraction: float = TOP_FRACTION) -> float:
    """Expected share of requests on the top ``fraction`` of ``n`` Zipf(s) channels."""
    return _harmonic(max(1, round(fraction * n)), s) / _harmonic(n, s)


def solve_zipf_exponent(n: int = N_CHANNELS, fraction: float = TOP_FRACTION,
                        share: float = TOP_SHARE) -> float:
    """The exponent s for which the top ``fraction`` of ``n`` channels carries ``share``.

    ``top_share`` rises monotonically from ``fraction`` (s = 0, uniform) towards 1 (large s),
    so the root is unique; brentq finds it to 1e-12.
    """
    return brentq(lambda s: top_share(n, s, fraction) - share, 1e-9, 20.0, xtol=1e-12)


@dataclass(frozen=True)
class Traffic:
    """Requests per channel and operation in the window, channels in everyday popularity order."""

    channel_ids: np.ndarray  # int64, [N_CHANNELS]
    counts: np.ndarray  # int64, [N_CHANNELS, len(OPERATIONS)]

    @property
    def per_channel(self) -> np.ndarray:
        return self.counts.sum(axis=1)


def everyday_traffic(s: float, streams: dict[str, np.random.Generator]) -> Traffic:
    """TOTAL_REQUESTS dealt to N_CHANNELS Zipf(s) channels, each a read or a write."""
    ids = streams["channel_ids"].choice(CHANNEL_ID_MAX, size=N_CHANNELS, replace=False) + 1
    weights = np.arange(1, N_CHANNELS + 1, dtype=np.float64) ** -s
    per_channel = streams["requests"].multinomial(TOTAL_REQUESTS, weights / weights.sum())
    writes = streams["operations"].binomial(per_channel, WRITE_FRACTION)
    return Traffic(ids.astype(np.int64), np.stack([per_channel - writes, writes], axis=1))


def event_traffic(everyday: Traffic, rng: np.random.Generator) -> Traffic:
    """The same hour with channel EVENT_CHANNEL_RANK carrying EVENT_SHARE of it alone.

    The total stays TOTAL_REQUESTS: the other channels keep a random subset of their requests
    (a multivariate hypergeometric draw over their (channel, op) cells) and the event channel
    takes the rest, split into reads and writes with the same WRITE_FRACTION.
    """
    event = EVENT_CHANNEL_RANK - 1
    event_requests = round(EVENT_SHARE * TOTAL_REQUESTS)
    others = np.delete(everyday.counts, event, axis=0)
    kept = rng.multivariate_hypergeometric(others.ravel(), TOTAL_REQUESTS - event_requests,
                                           method="marginals").reshape(others.shape)
    event_writes = int(rng.binomial(event_requests, WRITE_FRACTION))
    counts = np.insert(kept, event, [event_requests - event_writes, event_writes], axis=0)
    return Traffic(everyday.channel_ids, counts)


def arrival_times(rng: np.random.Generator) -> np.ndarray:
    """TOTAL_REQUESTS sorted request instants (s from the window's start): the per-second
    AR(1) swings times the on/off waves, dealt to ARRIVAL_CELL_SECONDS cells, uniform in each."""
    phi = math.exp(-1.0 / RATE_CORRELATION_SECONDS)
    noise = rng.standard_normal(WINDOW_SECONDS)
    noise[1:] *= math.sqrt(1.0 - phi * phi)  # stationary AR(1) with unit variance from x_0
    per_second = np.exp(RATE_LOG_SD * lfilter([1.0], [1.0, -phi], noise))
    # the waves: alternating exponential spells, burst first with probability WAVE_ON_FRACTION
    means = np.array([WAVE_ON_FRACTION, 1.0 - WAVE_ON_FRACTION]) * WAVE_CYCLE_SECONDS
    first = 0 if rng.random() < WAVE_ON_FRACTION else 1
    spells = 2 * int(WINDOW_SECONDS / WAVE_CYCLE_SECONDS * 1.5 + 16)
    state = (first + np.arange(spells)) % 2
    ends = np.cumsum(rng.standard_exponential(spells) * means[state])
    assert ends[-1] > WINDOW_SECONDS  # 1.5x the expected cycles: short by ~10 sigma at most
    cells = int(round(WINDOW_SECONDS / ARRIVAL_CELL_SECONDS))
    middle = (np.arange(cells) + 0.5) * ARRIVAL_CELL_SECONDS
    in_burst = state[np.searchsorted(ends, middle)] == 0
    quiet = (1.0 - WAVE_BURST * WAVE_ON_FRACTION) / (1.0 - WAVE_ON_FRACTION)
    weights = per_second[(middle // 1.0).astype(np.int64)] * np.where(in_burst, WAVE_BURST,
                                                                       quiet)
    counts = rng.multinomial(TOTAL_REQUESTS, weights / weights.sum())
    starts = np.repeat(np.arange(cells) * ARRIVAL_CELL_SECONDS, counts)
    return np.sort(starts + rng.random(starts.size) * ARRIVAL_CELL_SECONDS)


def rate_record(times: np.ndarray) -> dict:
    """The profile's ``rate``: mean, p99 and peak of the per-second request counts.

    Computed as ``hotshard profile --time`` computes it from event timestamps: the 99th
    percentile (nearest rank) and the maximum of the window's per-second counts.
    """
    per_second = np.bincount(np.minimum(times.astype(np.int64), WINDOW_SECONDS - 1),
                             minlength=WINDOW_SECONDS)
    return {
        "mean_rps": TOTAL_REQUESTS / WINDOW_SECONDS,
        "p99_rps": float(np.quantile(per_second, 0.99, method="inverted_cdf")),
        "peak_rps": float(per_second.max()),
        "seconds": WINDOW_SECONDS,
    }


@dataclass(frozen=True)
class Sessions:
    """Each channel's live session on the hour taken as a circle, as fractions of the hour:
    it starts at ``start`` and lasts ``length`` (1: the whole hour), channels in everyday
    popularity order. Both variants share them: the event does not move anyone's broadcast."""

    start: np.ndarray  # float64, [N_CHANNELS]
    length: np.ndarray  # float64, [N_CHANNELS]

    def live_at_a_moment(self) -> float:
        """How many channels are live at an average moment: the sum of the sessions' lengths."""
        return float(self.length.sum())

    def median_minutes(self, active: np.ndarray) -> float:
        """The median session, in minutes, of the channels with a request (``active``)."""
        return float(np.median(self.length[active])) * WINDOW_SECONDS / 60.0


def session_spans(per_channel: np.ndarray, rng: np.random.Generator) -> Sessions:
    """Sessions of hour x min(1, (n / FULL_HOUR_REQUESTS) ** SESSION_EXPONENT) for a channel of
    n requests, each starting at a uniform instant of the hour (a circle)."""
    length = np.minimum(1.0, (per_channel / FULL_HOUR_REQUESTS) ** SESSION_EXPONENT)
    return Sessions(rng.random(per_channel.size), length)


def _window_edges() -> np.ndarray:
    """The edges of EVENT_AUDIENCE's windows, as fractions of the hour."""
    return np.linspace(0.0, 1.0, len(EVENT_AUDIENCE) + 1)


def event_window_shares() -> np.ndarray:
    """The event channel's expected share of each window's requests: EVENT_AUDIENCE scaled so
    that the hour's average is EVENT_SHARE."""
    audience = np.asarray(EVENT_AUDIENCE, dtype=np.float64)
    return EVENT_SHARE * audience / audience.mean()


def request_keys(traffic: Traffic, sessions: Sessions, rng: np.random.Generator, *,
                 event: int | None = None) -> np.ndarray:
    """The channel ID of each of the hour's TOTAL_REQUESTS requests, in time order: the k-th
    is the k-th arrival's (``arrival_times``).

    Every request gets an instant of session time in [0, 1): uniform in its channel's session
    (on the circle); with ``event`` (a channel index, the event variant), the event channel's
    come by ``event_window_shares`` (uniform in each window) and every other channel's session
    time is read through the clock that gives its window w the share ``1 - share_w`` the event
    leaves of it (the inverse of that piecewise-linear CDF). Sorting the instants (stably)
    orders the channels; the k-th request in that order is served at the k-th arrival.
    """
    n = traffic.per_channel
    owner = np.repeat(np.arange(n.size, dtype=np.int64), n)
    u = sessions.start[owner] + sessions.length[owner] * rng.random(owner.size)
    u -= np.floor(u)  # on the circle
    if event is not None:
        edges = _window_edges()
        share = event_window_shares()
        others = np.concatenate([[0.0], np.cumsum(1.0 - share)])
        event_cdf = np.concatenate([[0.0], np.cumsum(share)])
        mine = owner == event
        u[~mine] = np.interp(u[~mine], others / others[-1], edges)
        u[mine] = np.interp(rng.random(int(mine.sum())), event_cdf / event_cdf[-1], edges)
    order = np.argsort(u, kind="stable")
    del u
    return traffic.channel_ids[owner[order]]


def time_sections(keys: np.ndarray, times: np.ndarray, head_ids: list[int]):
    """(locality, timelines) of the stream of channel ``keys`` at the sorted ``times`` (s
    from the window's start), measured as ``hotshard profile --time`` measures event rows
    (the DuckDB engine's calls): ``measure_locality`` in time order, ``measure_timelines`` of
    the head channels over the timestamps (epoch seconds, as a time column gives them)."""
    from hotshard.profile.locality import measure_locality
    from hotshard.profile.time_counts import measure_timelines

    locality = measure_locality(keys, order=f"time:{TIME_COLUMN}")
    timelines = measure_timelines(keys, WINDOW_START.timestamp() + times,
                                  np.asarray(head_ids, dtype=np.int64))
    return locality, timelines


def size_quantiles() -> dict[str, float]:
    """The profile's ``sizes.quantiles``: bytes of a stored message at p50, p90, p99."""
    return {q: float(MESSAGE_METADATA_BYTES + text) for q, text in MESSAGE_TEXT_BYTES.items()}


# --- building the profiles with the library ------------------------------------------------------

def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def build_profile(traffic: Traffic, *, times: np.ndarray, keys: np.ndarray, variant: str,
                  seed: int, workdir: Path, arrivals: ArrivalModel | None = None) -> Profile:
    """Profile the traffic's (channel_id, op, n) rows with ``count_profile``, then add what
    counts cannot carry: sizes, the rate and arrivals measured from ``times``, and the
    locality and head channels' timelines measured from the stream of ``keys`` at ``times``
    (``request_keys``: the same requests, in time order). ``arrivals``, when given, is
    ``measure_arrivals(times)`` already made (both variants share the hour's arrivals:
    measured once, not per file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n_ops = len(OPERATIONS)
    counts = traffic.counts.ravel()
    keep = counts > 0  # a channel with no writes has no write row, as in real counts
    table = pa.table({
        "channel_id": np.repeat(traffic.channel_ids, n_ops)[keep],
        "op": pa.array(np.tile(np.array(OPERATIONS), traffic.counts.shape[0])[keep]),
        "n": counts[keep],
    })
    path = workdir / f"{variant}.parquet"
    pq.write_table(table, path)
    profile = count_profile([str(path)], key="channel_id", counts="n", op="op", top_k=TOP_K,
                            min_count=MIN_COUNT)
    end = WINDOW_START + timedelta(seconds=WINDOW_SECONDS)
    source = {
        **profile.source,
        "inputs": [f"synthetic: examples/make_incident_profile.py --seed {seed} ({variant})"],
        "created": _stamp(end),  # fixed, so the same seed writes the same bytes
        "window": {"start": _stamp(WINDOW_START), "end": _stamp(end)},
    }
    locality, timelines = time_sections(keys, times, [int(k) for k in profile.dist.head_keys])
    profile = dataclasses.replace(profile, source=source, sizes={"quantiles": size_quantiles()},
                                  rate=rate_record(times),
                                  arrivals=arrivals or measure_arrivals(times),
                                  locality=locality, timelines=timelines)
    return Profile.from_dict(profile.to_dict())  # the validation a loaded file gets


# --- running ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Made:
    """One written profile and the numbers the script reports for it."""

    path: Path
    bytes: int
    events: int
    channels: int
    reads: int
    writes: int
    top1_share: float
    top10_share: float
    top1pct_share: float  # as the profile (and hotshard inspect) computes it
    top1pct_exact: float  # from the exact per-channel counts
    tail_alpha: float | None
    tail_alpha_se: float | None
    tail_xmin: float | None
    rate: dict
    sizes: dict
    live_channels: float  # channels live at an average moment (the sessions' total length)
    median_session_minutes: float
    cache_entries: int  # an LRU cache of 1% of the channels
    lru_hit_rate: float  # its hit rate, as the profile's locality section measured it
    irm_hit_rate: float  # its hit rate under independent draws (Che's approximation)
    event_channel: int | None = None
    event_share: float | None = None
    event_windows: tuple[float, ...] = ()  # its share of each timeline window's requests


def _irm_hit_rate(profile: Profile, entries: int) -> float:
    """An LRU cache's hit rate under independent draws from the profile's counts (Che)."""
    from hotshard.sim.cache import che_hit_rates

    tail_counts, tail_keys = profile.tail.classes()
    rates = np.concatenate([np.asarray(profile.head_counts, dtype=np.float64), tail_counts])
    keys = np.concatenate([np.ones(len(profile.head_counts)), tail_keys])
    return float(che_hit_rates(rates, keys, entries).hit_rate)


def _event_windows(profile: Profile, event_id: int) -> tuple[float, ...]:
    """The event channel's share of each timeline window's requests, from the profile."""
    timelines, arrivals = profile.timelines, profile.arrivals
    row = timelines.counts[[int(k) for k in profile.dist.head_keys].index(event_id)]
    # every window's requests, from the per-minute arrival counts (5 minutes a window here)
    per_window = np.asarray(arrivals.counts, dtype=np.float64).reshape(timelines.windows, -1)
    return tuple(float(x) for x in row / per_window.sum(axis=1))


def _made(path: Path, profile: Profile, traffic: Traffic, sessions: Sessions,
          event: bool) -> Made:
    per_channel = traffic.per_channel
    active = np.sort(per_channel[per_channel > 0])[::-1]
    top = max(1, round(TOP_FRACTION * active.size))
    shares = profile.dist.shares()
    law = profile.tail.power_law or {}
    event_id = int(traffic.channel_ids[EVENT_CHANNEL_RANK - 1]) if event else None
    entries = round(TOP_FRACTION * profile.keys)
    event_share = None
    if event_id is not None:
        event_share = float(per_channel[EVENT_CHANNEL_RANK - 1]) / float(per_channel.sum())
    return Made(
        path=path, bytes=path.stat().st_size, events=int(profile.events),
        channels=int(profile.keys),
        reads=int(profile.operations["read"].events),
        writes=int(profile.operations["write"].events),
        top1_share=float(shares["top1"]), top10_share=float(shares["top10"]),
        top1pct_share=float(shares["top1pct"]),
        top1pct_exact=float(active[:top].sum()) / float(active.sum()),
        tail_alpha=law.get("alpha"), tail_alpha_se=law.get("alpha_se"),
        tail_xmin=law.get("xmin"), rate=dict(profile.rate or {}),
        sizes=dict((profile.sizes or {}).get("quantiles") or {}),
        live_channels=sessions.live_at_a_moment(),
        median_session_minutes=sessions.median_minutes(per_channel > 0),
        cache_entries=entries, lru_hit_rate=profile.locality.lru_hit_rate(entries),
        irm_hit_rate=_irm_hit_rate(profile, entries), event_channel=event_id,
        event_share=event_share,
        event_windows=() if event_id is None else _event_windows(profile, event_id),
    )


def make(out_dir: Path | str = DATA, seed: int = SEED) -> tuple[float, list[Made]]:
    """Write both profiles into ``out_dir``; returns the solved Zipf exponent and their numbers."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    streams = {name: np.random.default_rng(c) for name, c in zip(_STREAMS, children, strict=True)}
    s = solve_zipf_exponent()
    everyday = everyday_traffic(s, streams)
    event = event_traffic(everyday, streams["event"])
    times = arrival_times(streams["rate"])  # the same hour's arrivals for both
    arrivals = measure_arrivals(times)
    sessions = session_spans(everyday.per_channel, streams["sessions"])  # shared, too
    made = []
    with tempfile.TemporaryDirectory(prefix="hotshard-incident-") as tmp:
        for traffic, name, variant in ((everyday, EVERYDAY_FILE, "everyday"),
                                       (event, EVENT_FILE, "event")):
            is_event = variant == "event"
            keys = request_keys(traffic, sessions, streams[f"{variant}_instants"],
                                event=EVENT_CHANNEL_RANK - 1 if is_event else None)
            profile = build_profile(traffic, times=times, keys=keys, variant=variant,
                                    seed=seed, workdir=Path(tmp), arrivals=arrivals)
            del keys
            path = out / name
            profile.save(path)
            made.append(_made(path, profile, traffic, sessions, event=is_event))
    return s, made


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is inside it (examples/...)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def report(s: float, made: list[Made]) -> str:
    """What the script prints: the solved exponent, then each file's numbers."""
    lines = [
        f"Zipf exponent s = {s:.6f}: the top {TOP_FRACTION:.0%} of {N_CHANNELS:,} channels "
        f"expect {top_share(N_CHANNELS, s):.2%} of requests (solved for {TOP_SHARE:.0%})",
        f"  count-distribution exponent alpha = 1 + 1/s = {1 + 1 / s:.3f}",
    ]
    for m in made:
        lines += [
            f"{_shown(m.path)} ({m.bytes / 1000:.1f} KB)",
            f"  events           {m.events:,} ({m.reads:,} reads, {m.writes:,} writes)",
            f"  channels         {m.channels:,} with at least one request",
            f"  top-1 channel    {m.top1_share:.2%}",
            f"  top-10 channels  {m.top10_share:.2%}",
            f"  top-1% channels  {m.top1pct_share:.2%} (exact counts: {m.top1pct_exact:.2%})",
        ]
        if m.tail_alpha is not None:
            lines.append(f"  tail power law   alpha {m.tail_alpha:.3f} +/- {m.tail_alpha_se:.3f}"
                         f", xmin {m.tail_xmin:,.0f}")
        lines.append(f"  rate             mean {m.rate['mean_rps']:,.0f}/s, p99 "
                     f"{m.rate['p99_rps']:,.0f}/s, peak {m.rate['peak_rps']:,.0f}/s over "
                     f"{m.rate['seconds']:,} s")
        lines.append("  message bytes    " + ", ".join(
            f"p{float(q) * 100:g} {v:,.0f}" for q, v in m.sizes.items()))
        lines.append(f"  sessions         median {m.median_session_minutes:.1f} min; "
                     f"{m.live_channels:,.0f} channels live at an average moment")
        lines.append(f"  LRU, 1% of keys  hit rate {m.lru_hit_rate:.3f} at {m.cache_entries:,} "
                     f"entries (independent draws: {m.irm_hit_rate:.3f}, Che)")
        if m.event_channel is not None:
            lines.append(f"  event channel    {m.event_channel} carries {m.event_share:.2%}")
            lines.append("  by 5-min window  " + " ".join(f"{x:.0%}" for x in m.event_windows))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Made]:
    parser = argparse.ArgumentParser(
        description="Write the incident profiles (incident.profile.json and "
                    "incident-event.profile.json) into the package's data directory.")
    parser.add_argument("--out-dir", default=str(DATA), help="directory to write into "
                        "(default: src/hotshard/data, which examples/ links to)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"random seed (default: {SEED})")
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    s, made = make(args.out_dir, args.seed)
    print(report(s, made))
    sys.stdout.flush()
    return made


if __name__ == "__main__":
    main()
