"""The reference chat-history service: a gateway in front of shard workers, each owning a store.

``store`` holds the ``Store`` interface and its SQLite implementation (one database per shard).
"""
