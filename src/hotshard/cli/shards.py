"""`hotshard shard` and `hotshard predict`: where keys land, and which shard runs hot."""

from __future__ import annotations

import json

import click

from hotshard.cli._options import (
    KEY_TYPE_RULE,
    PARTITIONER_CHOICE,
    SplitSpec,
    cached_keys_option,
    detection_from,
    detection_options,
    dist_option,
    need_shard_count,
    partitioner_options,
)


@click.command(epilog=KEY_TYPE_RULE)
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE, required=True,
              help="The store whose placement to reproduce.")
@click.option("--shards", "-n", type=click.IntRange(min=1), help="Shards / nodes / partitions.")
@partitioner_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
def shard(keys, partitioner, shards, key_type, as_json, **layout):
    """Print each key's shard (and slot, token or hash) exactly as the store places it.

    Keys that are all decimal integers are placed as 8-byte integers by stores that type keys,
    exactly as `predict` places a profile's integer keys (see the rule below); one key that is
    not an integer makes them all text, so each line shows the key type used.

    \b
    Examples:
      hotshard shard somekey '{user1000}.following' -p redis-cluster -n 3
      hotshard shard 4711 982 -p cassandra -n 12
      hotshard shard 21 foobar -p kafka -n 64
    """
    from hotshard.cli._console import note
    from hotshard.shards.place import place_keys

    need_shard_count(partitioner, shards, layout)
    placements = place_keys(keys, partitioner, shards, key_type=key_type, **layout)
    if placements.mixed_note:
        note(placements.mixed_note)
    for p in placements.keys:
        if as_json:
            click.echo(json.dumps(p.to_dict()))
        else:
            more = "".join(f"  {name} {value}" for name, value in p.details)
            click.echo(f"{p.key}\tshard {p.shard}  {p.key_type}{more}")


@click.command(epilog=KEY_TYPE_RULE)
@click.argument("profile_path", metavar="[PROFILE]", required=False)
@dist_option("instead of a PROFILE, every key placed exactly (at most 1e7 keys)")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE, required=True,
              help="The store whose placement to reproduce.")
@click.option("--shards", "-n", type=click.IntRange(min=1), help="Shards / nodes / partitions.")
@partitioner_options
@click.option("--rps", type=click.FloatRange(min=0, min_open=True),
              help="Total requests/s, to predict each shard's CPU (with --capacity).")
@click.option("--capacity", type=click.FloatRange(min=0, min_open=True),
              help="Requests/s one shard (one node) can serve at 100% CPU.")
@click.option("--split-hot", type=SplitSpec(), metavar="K:S",
              help="What if the top K keys were each split into S sub-partitions (time buckets)?")
@click.option("--replicas", type=click.IntRange(min=1), default=1, show_default=True,
              help="What if each shard's reads were spread over R replicas, the primary "
                   "included (1: no replica; writes go to all R)?")
@click.option("--cache-hit", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="What if this fraction of the top keys' reads hit a local cache?")
@click.option("--coalesce", is_flag=True,
              help="What if a read arriving while an identical read is in flight waited for "
                   "it? Needs --rps and --capacity: the merges are predicted from the rates.")
@cached_keys_option()
@click.option("--slots-from", metavar="redis://HOST:PORT",
              help="Redis Cluster: read the live CLUSTER SLOTS map from any node (the store's "
                   "own word for where keys live); nodes are numbered by address.")
@click.option("--key-template", metavar="TEMPLATE",
              help="Redis Cluster: the key name the store uses, {key} standing for the key "
                   "(e.g. 'chat:{{key}}' puts the key in a hash tag: same slot as the key).")
@click.option("--detect", is_flag=True,
              help="Model serve's hot-key detection for the profile's events (its timelines): "
                   "how soon after its start each event's key is found hot and mitigated, "
                   "its shard carrying it unmitigated until then.")
@detection_options()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def predict(profile_path, dist, partitioner, shards, key_type, rps, capacity, split_hot, replicas,
            cache_hit, coalesce, hot_keys, slots_from, key_template, detect, hot_window,
            hot_share, apply_time, as_json, **layout):
    """Predict each shard's share of load (and CPU) from a profile, before any test runs.

    Head keys are placed exactly by the store's partitioner; the tail is spread by its mean
    and variance (exact when the profile recorded this partitioner). Shows max/mean, the
    hottest shard and the keys that make it hot, and the band a uniform workload would show,
    so 95% against 20% is visibly not noise. With --rps and --capacity it names the shards
    over 100% CPU (saturated) and the rps at which the hottest shard reaches 100%.

    A hot shard is hot in a window. With a profile made with --time (its timelines), every
    window's shares are predicted too; the output leads with the peak window (the window and
    shard with the largest share of that window's requests) when it is not the whole span's
    hottest shard, with its keys, and lists the events: head keys carrying at least 3x their
    whole-span share, and at least 1%, of some window's requests (and 5 standard deviations
    above it). --rps is the whole span's mean: the peak's CPU is at that window's own rate.
    Mitigations apply to the peak window too, to its own top keys.

    Mitigation flags show before and after; they mean what they mean in `simulate` and
    `serve`. After them every share, of a shard or of a key, is of the requests before
    mitigation that reach one node of the shard: with a cache or replicas the shares add up to
    less than 100%. Only the profile's head keys are known by name, so --split-hot and
    --cached-keys reach at most those (the output says when). --coalesce counts the reads that
    must merge while one is in service (1/capacity), not those merged while it queues: an
    upper bound on what is left.

    \b
    --detect models serve's detection instead of mitigations from the first instant: each
    event is taken as a step in its key's share, found hot once that share fills --hot-share
    of the --hot-window (a reading every 0.5 s), so the output says how long its shard
    carries it unmitigated (simulate --detect measures the whole transient).

    \b
    Examples:
      hotshard predict profile.json -p cassandra -n 12 --rps 3000 --capacity 400
      hotshard predict profile.json -p kafka -n 64 --split-hot 10:8 --replicas 3
      hotshard predict profile.json -p kafka -n 16 --replicas 3 --detect --hot-window 5s
      hotshard predict --dist uniform:300000 -p kafka -n 64    # what a uniform test shows
    """
    from hotshard.mitigations import Mitigations
    from hotshard.profile.document import Profile
    from hotshard.render import prediction_summary
    from hotshard.shards.partitioners import partitioner_for
    from hotshard.shards.predict import predict as run_predict

    if bool(profile_path) == bool(dist):
        raise click.UsageError("give the keys: a PROFILE or --dist SPEC"
                               + (", not both" if dist else ""))
    if dist and detect:
        raise click.UsageError("--detect finds a profile's events (its timelines): give a "
                               "PROFILE, not --dist")
    detection = detection_from(detect, {"hot_window": hot_window, "hot_share": hot_share,
                                        "apply_time": apply_time})
    live = None
    if slots_from is not None:
        if partitioner != "redis-cluster":
            raise click.UsageError("--slots-from reads a Redis Cluster: use -p redis-cluster")
        from hotshard.cluster.topology import live_slot_map

        live = live_slot_map(slots_from)
    else:
        need_shard_count(partitioner, shards, layout)
    if (rps is None) != (capacity is None):
        raise click.UsageError("--rps and --capacity go together (CPU = rps x share / capacity)")
    if coalesce and rps is None:
        raise click.UsageError("--coalesce needs --rps and --capacity: how many reads merge "
                               "depends on how often a key's reads overlap one in flight")
    prof = Profile.load(profile_path) if profile_path else None
    part = partitioner_for(partitioner, shards, key_type=key_type,
                           integer_keys=prof.integer_keys if prof is not None else True,
                           key_template=key_template,
                           slot_node=live[0] if live else None, **layout)
    if live is not None and not as_json:
        from hotshard.cli._console import note

        note("nodes: " + ", ".join(f"{i} = {a}" for i, a in enumerate(live[1])))
    k, s = split_hot or (0, 1)
    mitigations = Mitigations(split_keys=k, split_into=s, replicas=replicas,
                              cache_hit=cache_hit, coalesce=coalesce, hot_keys=hot_keys)
    if prof is None:
        from hotshard.shards.predict import predict_distribution
        from hotshard.workload.generate import parse_dist

        result = predict_distribution(parse_dist(dist), part, rps=rps, capacity=capacity,
                                      mitigations=mitigations)
    else:
        result = run_predict(prof, part, rps=rps, capacity=capacity, mitigations=mitigations)
    found = None
    if detection is not None:
        from hotshard.shards.predict import predict_detection

        found = predict_detection(result, prof, part, detection)
    if as_json:
        doc = result.to_dict()
        if found is not None:
            doc["detection"] = {**detection.to_dict(), **found.to_dict()}
        click.echo(json.dumps(doc))
    else:
        click.echo(prediction_summary(result))
        if found is not None:
            _detection_text(detection, found.events, found.steady, mitigations,
                            result.timeline is None)


def _detection_text(detection, found, steady, mitigations, no_timelines) -> None:
    from hotshard.cli._console import note

    click.echo("")
    click.echo(f"Detection: {detection.text()}")
    for e in steady:
        click.echo(f"  key {e['key']} on shard {e['shard']}, {e['share']:.0%} of all requests: "
                   f"hot from the start, found within {e['found_within_s']:g} s of it")
    if not found:
        note("the profile has no timelines (profile it with --time): no event to find late"
             if no_timelines else "the profile's timelines show no event to find late")
        return
    if not mitigations.active:
        note("no mitigation given (--replicas, --cache-hit, --coalesce, --split-hot): the "
             "events are found, nothing is applied to them")
    for e in found:
        head = (f"  key {e['key']} on shard {e['shard']}, {e['share']:.0%} of the requests "
                f"from {e['start_s']:g} s to {e['end_s']:g} s:")
        if e["found_after_s"] is None:
            click.echo(f"{head} never found (under {detection.hot_share:.0%}): unmitigated")
        else:
            lo, hi = e["found_after_s"]
            click.echo(f"{head} found {lo:.2g}-{hi:.2g} s after its start; unmitigated "
                       "until then")
