"""How a component talks to the apiserver: the list-watch machinery every component shares.

Mirrors client-go (``rest``, ``tools/cache``, ``util/workqueue``, ``tools/leaderelection``,
``tools/record``), one module per concept:

* ``client.kubeconfig`` — ``ClientConfig`` (server, credentials, QPS) from flags or kubeconfig;
* ``client.rest`` — ``ApiClient``: typed verbs over one aiohttp session, errors from ``api.errors``;
* ``client.watch`` — the chunked watch-stream reader (``WatchStream``, ``WatchEvent``);
* ``client.backoff`` / ``client.ratelimit`` — the one backoff helper; token buckets and retry limiters;
* ``client.reflector`` — list, then watch, resume, relist: keeps a sink in step with the server;
* ``client.cache`` / ``client.informer`` — the indexed read-only cache and event handlers;
* ``client.workqueue`` / ``client.controller`` — keys, not events; N workers over a reconcile;
* ``client.expectations`` — what a replica controller asked for but has not yet seen;
* ``client.leader_election`` — one active replica per Lease (no fencing: see its docstring);
* ``client.events`` — non-blocking, aggregating core/v1 Event recorder.

``client/`` imports only ``api/``. The names below are the public surface.
"""

from client.cache import Indexer, object_key, split_key
from client.controller import Controller
from client.events import EventRecorder
from client.expectations import Expectations
from client.informer import Informer
from client.kubeconfig import ClientConfig, add_client_arguments
from client.leader_election import LeaderElectionConfig, LeaderElector
from client.reflector import Reflector, ReflectorOptions
from client.rest import ApiClient, ApiUnreachable
from client.watch import WatchEvent, WatchStream
from client.workqueue import ShutDown, WorkQueue

__all__ = [
    "ApiClient",
    "ApiUnreachable",
    "ClientConfig",
    "Controller",
    "EventRecorder",
    "Expectations",
    "Indexer",
    "Informer",
    "LeaderElectionConfig",
    "LeaderElector",
    "Reflector",
    "ReflectorOptions",
    "ShutDown",
    "WatchEvent",
    "WatchStream",
    "WorkQueue",
    "add_client_arguments",
    "object_key",
    "split_key",
]
