"""Locust reading hotshard's csv-feeder file: keep the locustfile, change only the key source.

    hotshard generate examples/incident.profile.json --messages 1e6 --seed 1 \\
        --format csv-feeder -o keys.csv
    locust -f examples/feeder_locustfile.py --headless -u 50 -r 50 -t 60s \\
        --host http://127.0.0.1:8080 --feeder keys.csv --feeder-user-rate 10

The users of a process take keys from one cursor, in the file's order, each the next one
(JMeter's CSV Data Set Config shares a file among its threads the same way), and start again
at the top when the file ends. The file is read as the test goes, so memory does not grow
with it. Run it as one process: Locust workers would each send the whole file.

Locust users are a closed loop: a user waits for each response before its next request, so a
slow shard receives fewer requests and its latency is under-reported (coordinated omission).
``constant_throughput`` keeps each user's pace only while responses come back in time. For
latencies a test can trust, use examples/locustfile.py, hotshard's open-loop user.
"""

from __future__ import annotations

import csv
from urllib.parse import quote

from locust import HttpUser, constant_throughput, events, task


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    parser.add_argument("--feeder", default="keys.csv",
                        help="A `hotshard generate --format csv-feeder` file")
    parser.add_argument("--feeder-user-rate", type=float, default=10.0,
                        help="Requests per second each user aims at")
    parser.add_argument("--feeder-limit", type=int, default=50,
                        help="Messages asked for per read")


class KeyFeeder:
    """The keys of a csv-feeder file, one after the other, round and round."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.handle = None
        self.rows = None
        self._rewind()

    def _rewind(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.handle = open(self.path, newline="", encoding="utf-8")  # noqa: SIM115 (kept open)
        self.rows = csv.reader(self.handle)
        header = next(self.rows, None)
        if header is None or len(header) != 1:
            raise ValueError(f"{self.path} is not a csv-feeder file: it should start with "
                             "one column name, then one key per line")

    def next_key(self) -> str:
        row = next(self.rows, None)
        if row is None:  # the end: from the top again
            self._rewind()
            row = next(self.rows, None)
            if row is None:
                raise ValueError(f"{self.path} holds no keys")
        return row[0]


def _feeder(environment) -> KeyFeeder:
    """One feeder per process, shared by its users."""
    feeder = getattr(environment, "hotshard_feeder", None)
    if feeder is None:
        feeder = environment.hotshard_feeder = KeyFeeder(environment.parsed_options.feeder)
    return feeder


class FeederUser(HttpUser):
    """Reads a page of each channel the feeder names, in the feeder's order."""

    def wait_time(self) -> float:
        return constant_throughput(self.environment.parsed_options.feeder_user_rate)(self)

    def on_start(self) -> None:
        self.feeder = _feeder(self.environment)
        self.limit = self.environment.parsed_options.feeder_limit

    @task
    def read(self) -> None:
        key = self.feeder.next_key()
        self.client.get(f"/channels/{quote(key, safe='')}/messages",
                        params={"limit": self.limit},
                        name="/channels/[channel]/messages")  # one stats row, not one per key
