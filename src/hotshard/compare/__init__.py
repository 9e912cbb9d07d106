"""Two key profiles side by side: does a load test's keys match production's (``check``), and
how did production's hot spots move between two windows (``diff``)."""
