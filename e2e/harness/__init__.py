"""The test harness: everything a test imports to build objects, run the operator and watch a
cluster, in one place instead of in the benchmark, in ``conftest`` or in other test modules.

- ``clusters``: the per-tier local clusters of a session (the fixtures in ``conftest.py`` hand
  them out) and the repository root.
- ``builder``: ``LeaderWorkerSet("name").replicas(2).size(3).image("engine:v1").build()``, the
  test-object builder, in the spirit of upstream's test wrappers, and its DisaggregatedSet
  counterpart (``DisaggregatedSet("llm").role(Role("prefill").replicas(2)...)``).
- ``disaggregated``: DisaggregatedSets on a cluster: convergence, exact checks of every child,
  pod and Service, and ``RolloutMonitor``, the watch that judges a coordinated rollout step by
  step.
- ``launcher``: the one way tests run the operator, in this process (controllers, webhooks or
  both) or as ``lws-operator run`` processes.
- ``admission``: in-process webhooks confined to a test namespace, and the leader-pod load the
  admission tests and the webhook benchmark drive through them.
- ``converge``: what "the operator has finished" means, judged from the API.
- ``replicas``: operator processes (replicas) started into a confined namespace, for the
  high-availability and operator-kill runs.
- ``metrics``: a Prometheus scrape as a dict (``parse``, ``total``) and which verbs are writes.

The test client is ``e2e.kube.Kube`` (dicts in, dicts out, and ``wait_for``). The operator's own
``KubeClient`` appears in tests only where it is what is tested (its limits, metrics, encoding),
where a runtime under test is built on it, or where a load driver needs its raw paths.
"""
