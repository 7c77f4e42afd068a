"""lws-operator: a Python implementation of the LeaderWorkerSet API.

The API group is ``leaderworkerset.x-k8s.io/v1``, served by the upstream CRD.
"""

__version__ = "0.1.0"
