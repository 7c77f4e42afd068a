"""The unit tests' harness: what more than one test module builds its inputs from, in one place
instead of in a test module that other tests import. Tests import it by its path from the
repository root (``from tests.harness.clock import ManualClock``); the cluster tests' harness is
``e2e.harness``, which this one may use and which never imports from ``tests``.

- ``lws_bodies``, ``ds_bodies``, ``pod_bodies``: LeaderWorkerSets as upstream leaves them, the
  DisaggregatedSet objects, and pods as a LeaderWorkerSet's StatefulSets create them.
- ``as_operated``: objects exactly as the running operator holds them (stored, defaulted,
  admitted, cached).
- ``lws_world``, ``ds_world``: a pass of each controller over a simulated API server, with the
  real builders and the real cache store (``hack/pass_bench.py`` runs the first).
- ``clock``: a manual clock whose ``sleep`` wakes on ``advance``.
- ``quantities``: quantities as written and as the API server stores them.
- ``crd_schema``: what a CRD's structural schema may say, and a walk over its nodes.
- ``quiet_kube``: an API server where nothing exists yet.
- ``api_answers``: the Status object of a refused request, and a validating webhook's refusal
  as the API server relays it.
"""
