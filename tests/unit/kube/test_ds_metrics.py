"""The DisaggregatedSet replica gauges: per role and revision over the slices, and gone with
the revision or the set."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from lws_operator.api.disaggregated import KIND
from lws_operator.kube.disaggregated_metrics import DisaggregatedSetMetrics
from tests.harness.ds_world import DS_NAME, NAMESPACE, disaggregated_set, new_world, role

KEY = (NAMESPACE, DS_NAME)


def _value(registry: CollectorRegistry, role_name: str, rev: str, state: str) -> float | None:
    return registry.get_sample_value("lws_disaggregatedset_role_replicas", {
        "namespace": NAMESPACE, "name": DS_NAME, "role": role_name, "revision": rev,
        "state": state})


def test_gauges_follow_roles_and_revisions_and_go_with_the_set() -> None:
    registry = CollectorRegistry()
    metrics = DisaggregatedSetMetrics(registry)
    world = new_world(disaggregated_set(role("prefill", 2), role("decode", 1), slices=2))
    for k in (0, 1):
        world.child(f"{DS_NAME}-{k}-old-prefill", "prefill", "old", 2, slice_index=k)
        world.child(f"{DS_NAME}-{k}-new-prefill", "prefill", "new", 1, slice_index=k,
                    ready=False)
    world.child(f"{DS_NAME}-0-other-prefill", "prefill", "other", 5, owner_uid="foreign")
    metrics.observe(KEY, world.cache)
    assert _value(registry, "prefill", "old", "desired") == 4
    assert _value(registry, "prefill", "old", "ready") == 4
    assert _value(registry, "prefill", "new", "desired") == 2
    assert _value(registry, "prefill", "new", "current") == 2
    assert _value(registry, "prefill", "new", "ready") == 0
    assert _value(registry, "prefill", "other", "desired") is None  # not the set's

    for k in (0, 1):
        world.remove("LeaderWorkerSet", f"{DS_NAME}-{k}-old-prefill")
    metrics.observe(KEY, world.cache)
    assert _value(registry, "prefill", "old", "desired") is None
    assert _value(registry, "prefill", "new", "desired") == 2

    world.remove(KIND, DS_NAME)
    metrics.observe(KEY, world.cache)
    assert _value(registry, "prefill", "new", "desired") is None


def _progressing(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("lws_disaggregatedset_progressing",
                                     {"namespace": NAMESPACE, "name": DS_NAME})


def test_progressing_follows_the_condition_and_goes_with_the_set() -> None:
    registry = CollectorRegistry()
    metrics = DisaggregatedSetMetrics(registry)
    world = new_world(disaggregated_set(role("prefill", 1)))
    metrics.observe(KEY, world.cache)
    assert _progressing(registry) == 0  # no condition yet
    for status, expected in (("True", 1), ("False", 0)):
        world.edit(lambda ds, status=status: ds.setdefault("status", {}).update(conditions=[
            {"type": "Available", "status": "True" if status == "False" else "False"},
            {"type": "Progressing", "status": status}]))
        metrics.observe(KEY, world.cache)
        assert _progressing(registry) == expected
    world.remove(KIND, DS_NAME)
    metrics.observe(KEY, world.cache)
    assert _progressing(registry) is None
    metrics.observe(KEY, world.cache)  # a set observed gone twice: nothing to remove
