"""The kubelet's back-off policies for container restarts, image pulls and failed syncs.

Why a module of its own: the numbers users see in ``kubectl describe pod`` ("back-off 20s
restarting failed container") and the policies behind them are one decision, made in one place
as ``pkg/kubelet/kubelet.go`` does (``backOffPeriod``, ``MaxContainerBackOff``).

What it owns: ``CRASH_BACKOFF`` (10 s doubling to 5 min, forgiven after 10 min of running),
``PULL_BACKOFF`` (the same for image pulls), how long ``ErrImagePull`` shows before
``ImagePullBackOff``, the back-off of a pod sync that raised, and ``go_duration``, the Go
``time.Duration`` spelling the messages use.

What it does not guarantee: back-off state lives in the worker's memory; a restarted kubelet
starts every back-off afresh.
"""

from __future__ import annotations

from client.backoff import BackoffPolicy

__all__ = [
    "CRASH_BACKOFF",
    "ERR_IMAGE_PULL_SHOWN",
    "PULL_BACKOFF",
    "SYNC_ERROR_BACKOFF",
    "go_duration",
]

CRASH_BACKOFF = BackoffPolicy(initial=10.0, factor=2.0, cap=300.0, jitter=0.0, reset_after=600.0)
"""The kubelet's container restart back-off: 10 s doubling to 5 min, forgiven after 10 min."""
PULL_BACKOFF = CRASH_BACKOFF
"""Image pulls back off the same way."""
ERR_IMAGE_PULL_SHOWN = 1.0
"""How long ``ErrImagePull`` stays in the status before it reads ``ImagePullBackOff``."""
SYNC_ERROR_BACKOFF = BackoffPolicy(initial=1.0, factor=2.0, cap=30.0, jitter=0.2, reset_after=60.0)
"""A sync (or a final status write, or the deletion confirmation) that failed is retried so."""


def go_duration(seconds: float, *, precise: bool = False) -> str:
    """Go's ``time.Duration`` spelling: ``10s``, ``1m20s``, ``5m0s``, ``412ms``."""
    if precise and seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if precise:
        return f"{seconds:.3f}s"
    total = round(seconds)
    minutes, secs = divmod(total, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"
