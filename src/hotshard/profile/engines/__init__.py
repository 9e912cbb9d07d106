"""Counting engines behind ``hotshard profile``: each turns a ``CountSpec`` into ``RawCounts``."""
