"""Revision snapshots and keys (upstream's revision_utils.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.logic.identity.revision import (
    apply_revision,
    canonical_json,
    fnv1_32,
    revision_key,
    revision_name,
    revision_patch,
    safe_encode,
)


def lws(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "sample", "labels": {"a": "b"}},
        "spec": {
            "replicas": 3,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                "maxUnavailable": 1, "maxSurge": 0, "partition": 0}},
            "networkConfig": {"subdomainPolicy": "Shared"},
            "leaderWorkerTemplate": {
                "size": 4,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {"spec": {"containers": [{"name": "m", "image": "nginx:1"}]}},
            },
        },
    }
    body["spec"].update(spec)
    return body


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # Reference values of 32-bit FNV-1 (offset basis 2166136261, prime 16777619).
        (b"", 2166136261),
        (b"a", 0x050C5D7E),
        (b"foobar", 0x31F0B262),
    ],
)
def test_fnv1_32(data: bytes, expected: int) -> None:
    assert fnv1_32(data) == expected


def test_safe_encode_maps_digits_like_kubernetes() -> None:
    assert safe_encode("0123456789") == "456789bcdf"


def test_patch_shape_and_bytes() -> None:
    patch = revision_patch(lws())
    assert set(patch["spec"]) == {"leaderWorkerTemplate", "networkConfig"}
    assert patch["spec"]["leaderWorkerTemplate"]["$patch"] == "replace"
    assert patch["spec"]["networkConfig"] == {"$patch": "replace", "subdomainPolicy": "Shared"}
    raw = canonical_json(patch)
    assert b" " not in raw
    assert raw.startswith(b'{"spec":{"leaderWorkerTemplate":{"$patch":"replace","restartPolicy"')


def test_missing_network_config_hashes_like_shared() -> None:
    explicit = lws()
    implicit = lws()
    del implicit["spec"]["networkConfig"]
    assert revision_key(explicit) == revision_key(implicit)


def test_key_alphabet_and_stability() -> None:
    key = revision_key(lws())
    assert 1 <= len(key) <= 10
    assert set(key) <= set("456789bcdf")
    assert revision_key(copy.deepcopy(lws())) == key


@pytest.mark.parametrize(
    ("change", "rolls"),
    [
        ({"replicas": 10}, False),
        ({"startupPolicy": "LeaderReady"}, False),
        ({"rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "maxUnavailable": 2, "maxSurge": 1, "partition": 2}}}, False),
        ({"networkConfig": {"subdomainPolicy": "UniquePerReplica"}}, True),
    ],
)
def test_what_is_part_of_the_revision(change: dict[str, Any], rolls: bool) -> None:
    assert (revision_key(lws(**change)) != revision_key(lws())) is rolls


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.update(size=5),
        lambda t: t.update(restartPolicy="None"),
        lambda t: t["workerTemplate"]["spec"]["containers"][0].update(image="nginx:2"),
        lambda t: t.update(leaderTemplate={"spec": {"containers": [{"name": "l", "image": "x"}]}}),
        lambda t: t.update(subGroupPolicy={"subGroupSize": 2}),
        lambda t: t.update(volumeClaimTemplates=[{"metadata": {"name": "d"}}]),
    ],
)
def test_template_changes_change_the_key(mutate: Any) -> None:
    changed = lws()
    mutate(changed["spec"]["leaderWorkerTemplate"])
    assert revision_key(changed) != revision_key(lws())


@pytest.mark.parametrize("mutate", [
    lambda t: t.update(maxGroupRestarts=3),
    lambda t: t.update(restartBackoff={"baseSeconds": 1, "capSeconds": 8}),
])
def test_restart_budget_and_backoff_do_not_change_the_key(mutate: Any) -> None:
    """Controller settings, not pod settings: retuning them rolls no group, and so editing
    maxGroupRestarts cannot bring back an exhausted group (LWS docs, "Recover an Exhausted
    Group")."""
    changed = lws()
    mutate(changed["spec"]["leaderWorkerTemplate"])
    assert revision_key(changed) == revision_key(lws())


def test_metadata_does_not_change_the_key() -> None:
    other = lws()
    other["metadata"]["annotations"] = {"x": "y"}
    assert revision_key(other) == revision_key(lws())


def test_apply_revision_restores_templates_and_keeps_live_fields() -> None:
    old = lws()
    live = lws(replicas=7, networkConfig={"subdomainPolicy": "UniquePerReplica"})
    live["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "v2"
    live["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = 3
    rebuilt = apply_revision(live, revision_patch(old))
    assert rebuilt["spec"]["replicas"] == 7
    assert rebuilt["metadata"] == live["metadata"]
    assert rebuilt["spec"]["leaderWorkerTemplate"] == old["spec"]["leaderWorkerTemplate"]
    assert rebuilt["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert revision_key(rebuilt) == revision_key(old)
    assert live["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] == 3  # input untouched


def test_revision_name_truncates_the_lws_name() -> None:
    assert revision_name("a" * 300, "5c5fcdfb44", 2) == "a" * 220 + "-5c5fcdfb44-2"
