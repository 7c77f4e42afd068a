"""The documented DISAGGREGATEDSET_* variables, added by the pod webhook to every container of a
DisaggregatedSet's pods (the LWS docs' Environment Variables table; upstream's controller never
injects them)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api import disaggregated as ds
from lws_operator.logic.mutation.env import disaggregatedset_env
from lws_operator.logic.mutation.pod import mutate_pod
from tests.harness.pod_bodies import LWS_ENV_NAMES, container, leader, worker

DS_ENV_NAMES = ("DISAGGREGATEDSET_NAME", "DISAGGREGATEDSET_ROLE", "DISAGGREGATEDSET_SLICE",
                "DISAGGREGATEDSET_REVISION")
DS_LABELS = {ds.NAME_LABEL: "my-llm", ds.ROLE_LABEL: "prefill", ds.SLICE_LABEL: "1",
             ds.REVISION_LABEL: "a1b2c3d4"}
DS_ENV = [
    {"name": "DISAGGREGATEDSET_NAME", "value": "my-llm"},
    {"name": "DISAGGREGATEDSET_ROLE", "value": "prefill"},
    {"name": "DISAGGREGATEDSET_SLICE", "value": "1"},
    {"name": "DISAGGREGATEDSET_REVISION", "value": "a1b2c3d4"},
]


def ds_pod(base: dict[str, Any], **labels: str | None) -> dict[str, Any]:
    """``base`` (an LWS pod as its StatefulSet creates it) with the DisaggregatedSet's labels,
    as the DisaggregatedSet controller's pod template gives them; ``slice=None`` drops one."""
    merged = {**DS_LABELS, **{getattr(ds, f"{k.upper()}_LABEL"): v for k, v in labels.items()}}
    base["metadata"]["labels"].update({k: v for k, v in merged.items() if v is not None})
    return base


def names(p: dict[str, Any], index: int = 0, kind: str = "containers") -> list[str]:
    return [e["name"] for e in p["spec"][kind][index].get("env", [])]


def test_constants_are_the_guide_names() -> None:
    assert (ds.ENV_NAME, ds.ENV_ROLE, ds.ENV_SLICE, ds.ENV_REVISION) == DS_ENV_NAMES


def test_leader_gets_the_four_variables_after_the_lws_ones_in_every_container() -> None:
    p = ds_pod(leader("my-llm-1-a1b2c3d4-prefill-0", "2"))
    p["spec"]["containers"] = [container("a", env=[{"name": "USER", "value": "u"}]),
                               container("b")]
    p["spec"]["initContainers"] = [container("init")]
    result = mutate_pod(p)
    for kind, index in (("containers", 0), ("containers", 1), ("initContainers", 0)):
        env = result["spec"][kind][index]["env"]
        assert [e["name"] for e in env[:3]] == list(LWS_ENV_NAMES)
        assert env[3:7] == DS_ENV, (kind, index)
    assert result["spec"]["containers"][0]["env"][7:] == [{"name": "USER", "value": "u"}]
    assert len(result["spec"]["containers"][1]["env"]) == 7


def test_worker_gets_them_too() -> None:
    p = ds_pod(worker("my-llm-1-a1b2c3d4-prefill-0-1", "2", "0"))
    assert mutate_pod(p)["spec"]["containers"][0]["env"][3:] == DS_ENV


def test_a_pod_without_slice_label_is_slice_zero() -> None:
    """A LeaderWorkerSet made before slices (``<ds>-<rev>-<role>``) has no slice label."""
    p = ds_pod(leader("my-llm-a1b2c3d4-prefill-0"), slice=None)
    env = mutate_pod(p)["spec"]["containers"][0]["env"]
    assert {"name": "DISAGGREGATEDSET_SLICE", "value": "0"} in env
    assert names(mutate_pod(p))[3:] == list(DS_ENV_NAMES)


def test_an_empty_slice_label_is_slice_zero() -> None:
    p = ds_pod(leader("my-llm-a1b2c3d4-prefill-0"), slice="")
    assert {"name": "DISAGGREGATEDSET_SLICE", "value": "0"} in mutate_pod(p)["spec"][
        "containers"][0]["env"]


def test_a_user_value_is_never_overwritten_and_keeps_its_place() -> None:
    user_role = {"name": "DISAGGREGATEDSET_ROLE", "value": "mine"}
    from_field = {"name": "DISAGGREGATEDSET_REVISION",
                  "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    p = ds_pod(leader("my-llm-0-a1b2c3d4-prefill-0"))
    p["spec"]["containers"] = [container("a", env=[{"name": "X", "value": "1"}, user_role,
                                                   from_field])]
    env = mutate_pod(p)["spec"]["containers"][0]["env"]
    assert env[3:] == [DS_ENV[0], DS_ENV[2], {"name": "X", "value": "1"}, user_role, from_field]


def test_a_user_value_in_one_container_does_not_stop_the_others() -> None:
    p = ds_pod(leader("my-llm-0-a1b2c3d4-prefill-0"))
    p["spec"]["containers"] = [
        container("a", env=[{"name": "DISAGGREGATEDSET_NAME", "value": "x"}]),
        container("b")]
    result = mutate_pod(p)
    assert result["spec"]["containers"][1]["env"][3:] == DS_ENV
    assert names(result).count("DISAGGREGATEDSET_NAME") == 1


def test_pods_of_a_plain_leaderworkerset_get_none() -> None:
    result = mutate_pod(leader("plain-0", "2"))
    assert names(result) == list(LWS_ENV_NAMES)


def test_a_missing_role_or_revision_label_leaves_that_variable_out() -> None:
    p = ds_pod(leader("my-llm-0-a1b2c3d4-prefill-0"), role=None, revision=None)
    assert names(mutate_pod(p))[3:] == ["DISAGGREGATEDSET_NAME", "DISAGGREGATEDSET_SLICE"]


def test_mutating_twice_changes_nothing() -> None:
    p = ds_pod(leader("my-llm-1-a1b2c3d4-prefill-0", "2"))
    p["spec"]["containers"] = [container("a", env=[{"name": "USER", "value": "u"}])]
    once = mutate_pod(p)
    assert mutate_pod(once) == once


@pytest.mark.parametrize(("labels", "expected"), [
    ({}, []),
    ({ds.NAME_LABEL: "n"}, [("DISAGGREGATEDSET_NAME", "n"), ("DISAGGREGATEDSET_SLICE", "0")]),
    (DS_LABELS, [(e["name"], e["value"]) for e in DS_ENV]),
])
def test_disaggregatedset_env_table(labels: dict[str, str],
                                    expected: list[tuple[str, str]]) -> None:
    pod = {"metadata": {"labels": dict(labels)}}
    assert [(e["name"], e["value"]) for e in disaggregatedset_env(pod)] == expected
