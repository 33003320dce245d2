"""kubelite's object model: the Kubernetes-shaped types every process shares.

``api`` is the bottom floor: it imports nothing else of kubelite (checked by import-linter),
so the apiserver, the client machinery and every component can depend on it freely.
"""
