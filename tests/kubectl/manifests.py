"""The manifests the kubectl tests apply, as people write them (YAML), parameterised by name."""

from __future__ import annotations


def pod(name: str, *, image: str = "busybox:1.36", node: str | None = None, tier: str = "a") -> str:
    node_line = f"\n  nodeName: {node}" if node else ""
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels:
    app: {name}
    tier: {tier}
spec:{node_line}
  containers:
  - name: main
    image: {image}
    command: ["sh", "-c", "sleep 3600"]
    env:
    - name: FOO
      value: bar
    ports:
    - containerPort: 8080
"""


def replication_controller(name: str, *, replicas: int = 2, image: str = "nginx:1.27") -> str:
    return f"""\
apiVersion: v1
kind: ReplicationController
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: web
        image: {image}
        ports:
        - containerPort: 80
"""


def deployment(name: str, *, replicas: int = 3, image: str = "nginx:1.27") -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: web
        image: {image}
"""


def node(name: str) -> str:
    return f"""\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    kubernetes.io/hostname: {name}
    node-role.kubernetes.io/worker: ""
"""


def event(name: str, *, pod: str, namespace: str = "default") -> str:
    return f"""\
apiVersion: v1
kind: Event
metadata:
  name: {name}
  namespace: {namespace}
involvedObject:
  apiVersion: v1
  kind: Pod
  name: {pod}
  namespace: {namespace}
  fieldPath: spec.containers{{main}}
reason: Started
message: Started container main
type: Normal
count: 1
source:
  component: kubelet
  host: node1
firstTimestamp: "2026-01-01T00:00:00Z"
lastTimestamp: "2026-01-01T00:00:00Z"
"""


def namespace(name: str) -> str:
    # for `kubectl apply`; `kubectl create namespace` (a protobuf body) is tested on its own
    return f"""\
apiVersion: v1
kind: Namespace
metadata:
  name: {name}
"""
