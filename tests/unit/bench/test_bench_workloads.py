"""The benchmark's two topologies describe the same pods."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from e2e.bench.workloads import (
    IMAGE,
    MAX_SURGE,
    PROFILES,
    ROLLED_IMAGE,
    SET_LABEL,
    Profile,
    baseline,
    leaderworkerset,
    pod_names,
    rolled_leaderworkerset_patch,
    rolled_statefulset_patch,
)
from e2e.cluster.nodes import NodeLayout, node_manifests
from lws_operator.api.defaults import apply_defaults
from lws_operator.api.validation import validate


@pytest.mark.parametrize("profile", list(PROFILES.values()), ids=list(PROFILES))
def test_baseline_has_the_operators_pods(profile: Profile) -> None:
    objects = baseline("bench-000", profile)
    statefulsets = [o for o in objects if o["kind"] == "StatefulSet"]
    assert sum(o["spec"]["replicas"] for o in statefulsets) == profile.replicas * profile.size
    assert len(statefulsets) == 1 + profile.replicas
    for sts in statefulsets:
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert labels[SET_LABEL] == "bench-000"
        assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert [o["kind"] for o in objects].count("Service") == 1
    names = {f"{sts['metadata']['name']}-{ordinal}" for sts in statefulsets
             for ordinal in range(sts["spec"]["ordinals"]["start"],
                                  sts["spec"]["ordinals"]["start"] + sts["spec"]["replicas"])}
    assert names == pod_names("bench-000", profile)  # the same pod names as the operator's
    assert len(names) == profile.replicas * profile.size


@pytest.mark.parametrize("profile", list(PROFILES.values()), ids=list(PROFILES))
def test_the_leaderworkerset_is_valid_and_labels_its_pods(profile: Profile) -> None:
    lws = leaderworkerset("bench-000", profile)
    assert validate(apply_defaults(lws), None) == []
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == profile.size
    for role in ("leaderTemplate", "workerTemplate"):
        assert template[role]["metadata"]["labels"][SET_LABEL] == "bench-000"
        assert template[role]["spec"]["containers"][0]["image"] == IMAGE


def test_the_rollout_patches_change_only_the_image() -> None:
    patch = rolled_leaderworkerset_patch()["spec"]["leaderWorkerTemplate"]
    assert {patch[r]["spec"]["containers"][0]["image"] for r in patch} == {ROLLED_IMAGE}
    assert rolled_statefulset_patch()["spec"]["template"]["spec"]["containers"] == [
        {"name": "model", "image": ROLLED_IMAGE}]


@pytest.mark.parametrize(("change", "message"), [
    ({"sets": 0}, "--sets must be at least 1"),
    ({"size": 1}, "--size must be at least 2"),
    ({"replicas": -1}, "--replicas must be at least 1"),
    ({"sets": 1000}, "--sets must be at most 999"),
    ({"timeout": 0}, "--timeout > 0"),
])
def test_bad_sizes_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replace(PROFILES["default"], **change).check()


def test_the_default_profile_is_the_issues() -> None:
    default = PROFILES["default"]
    assert (default.sets, default.replicas, default.size, default.pods) == (20, 5, 8, 800)


def test_the_large_profile_fits_its_nodes() -> None:
    """5,000 pods, and the benchmark's own cluster for it (GPU nodes plus four TPU nodes, as
    ``e2e.bench.scale`` lays it out) allocates every pod plus a surge group per set, which its
    preflight demands, with room to spare for the scheduler."""
    large = PROFILES["large"]
    assert large.pods >= 5000
    layout = NodeLayout(gpu_nodes=max(large.nodes - 4, 1), tpu_nodes=4)
    capacity = sum(int(n["status"]["allocatable"]["pods"]) for n in node_manifests(layout))
    needed = large.pods + large.sets * large.size * MAX_SURGE
    assert capacity >= needed * 1.25
