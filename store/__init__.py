"""The pluggable store: one etcd-shaped interface (``store.base.Store``), several backends.

Only the apiserver imports this package (checked by import-linter). ``open_store(url)`` picks the
backend from the URL: ``memory://``, ``sqlite:///path.db``, and later ``etcd://host:2379``.
"""
