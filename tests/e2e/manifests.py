"""The objects the e2e tests create, as a person would write them (JSON-shaped dicts)."""

from __future__ import annotations

from typing import Any

__all__ = ["rc", "sleeper"]

Obj = dict[str, Any]


def rc(name: str, *, replicas: int, image: str = "nginx:1.27") -> Obj:
    """An RC of nginx pods labelled ``app=<name>``, serving HTTP on port 80 of their pod IP."""
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"app": name},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}
                    ],
                },
            },
        },
    }


def sleeper(name: str, **spec: Any) -> Obj:
    """A busybox pod that sleeps for an hour; ``spec`` adds fields (``nodeSelector=...``)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"role": "sleeper"}},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}],
            **spec,
        },
    }
