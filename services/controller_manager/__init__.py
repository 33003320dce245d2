"""The controller-manager: replication, ReplicaSets, Deployments, node lifecycle, garbage
collection and namespace deletion, each on the shared informers of ``client/`` and under one
leader election (see ``manager``). Run it with ``kubelite controller-manager`` or
``python -m services.controller_manager``.
"""
