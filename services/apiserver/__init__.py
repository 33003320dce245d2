"""The apiserver: Kubernetes' REST and watch API over kubelite's pluggable store.

Every component lists and watches here and nowhere else. ``app.make_app`` builds the aiohttp
application (used by ``main`` for ``kubelite apiserver`` and by tests in-process); ``rest``,
``listing``, ``watch``, ``deletion`` and ``subresources`` serve the resource paths; ``storage``
is the only code that touches the store; ``watchcache`` fans each store event out to every
watcher.
"""
