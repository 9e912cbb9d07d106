"""A local Redis Cluster: start, stop, status, and its live slot map."""
