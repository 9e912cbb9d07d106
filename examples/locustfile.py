"""Open-loop hotshard load from Locust workers (see ``hotshard.drive.locust``).

One Poisson schedule at ``--hotshard-rate`` requests/s is shared out over the workers; each
request is timed from its intended send instant, and the master merges the workers'
HdrHistograms into a ``hotshard.observations/1`` file::

    locust -f examples/locustfile.py --master --headless --expect-workers 2 -u 2 \\
        --host http://127.0.0.1:8080 --hotshard-keys examples/incident.profile.json \\
        --hotshard-rate 2000 --hotshard-duration 60 --hotshard-out observations.json
    locust -f examples/locustfile.py --worker --master-host 127.0.0.1   # once per worker
"""

from locust import events

from hotshard.drive.locust import HotshardUser, install

install(events)

__all__ = ["HotshardUser"]
