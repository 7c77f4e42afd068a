"""``kubectl lws plan`` of a DisaggregatedSet: the proposed change (does it roll?) and the step
table drawn from the controller's planner."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.disaggregated import API_VERSION, KIND
from lws_operator.plugin.analysis.ds_change import proposed_ds, replicas_change, rollout_cause
from lws_operator.plugin.analysis.ds_rollout import proposed_rollout
from lws_operator.plugin.analysis.set_change import ChangeError, ImageChange
from lws_operator.plugin.output import Paint
from lws_operator.plugin.plan_ds import step_table


def role(name: str, replicas: int, image: str = "vllm:1", **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra, "spec": {
        "replicas": replicas,
        "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {"containers": [
            {"name": "model", "image": image}]}}}}}


def ds(*roles: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "dis", "namespace": "ns", "uid": "u"},
            "spec": {"roles": list(roles)}}


LIVE = ds(role("prefill", 2), role("decode", 1))


def image_of(body: dict[str, Any], index: int) -> str:
    spec = body["spec"]["roles"][index]["spec"]
    return str(spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"])


def test_set_image_applies_to_every_role_and_leaves_the_live_set_alone() -> None:
    new = proposed_ds(LIVE, images=[ImageChange("model", "vllm:2")])
    assert [image_of(new, 0), image_of(new, 1)] == ["vllm:2", "vllm:2"]
    assert image_of(LIVE, 0) == "vllm:1"
    with pytest.raises(ChangeError, match="no container named 'nope'"):
        proposed_ds(LIVE, images=[ImageChange("nope", "x")])


@pytest.mark.parametrize(("manifest", "message"), [
    ({"kind": "LeaderWorkerSet", "spec": {}}, "not a DisaggregatedSet"),
    ({"kind": KIND, "metadata": {"name": "other"}, "spec": {}}, "names 'other', not 'dis'"),
])
def test_a_manifest_of_another_object_is_refused(manifest: dict[str, Any], message: str) -> None:
    with pytest.raises(ChangeError, match=message):
        proposed_ds(LIVE, manifest=manifest)


CAUSES = [
    ("an image", ds(role("prefill", 2, "vllm:2"), role("decode", 1)),
     "role prefill's templates change (first difference: .template.workerTemplate.spec."
     "containers[0].image)", []),
    ("replicas only", ds(role("prefill", 3), role("decode", 1)), None, ["prefill 2 → 3"]),
    ("a reorder", ds(role("decode", 1), role("prefill", 2)), None, []),
    ("a role added", ds(role("prefill", 2), role("decode", 1), role("encode", 1)),
     "the roles change (prefill, decode → prefill, decode, encode)", []),
    ("a rename", ds(role("p", 2), role("decode", 1)), "the roles change", []),
    ("the same written with defaults", ds(
        {**role("prefill", 2), "spec": {**role("prefill", 2)["spec"], "leaderWorkerTemplate": {
            **role("prefill", 2)["spec"]["leaderWorkerTemplate"],
            "restartPolicy": "RecreateGroupOnPodRestart"}}}, role("decode", 1)), None, []),
    ("group identity", ds({**role("prefill", 2), "spec": {**role("prefill", 2)["spec"],
                                                          "groupIdentity": "Hash"}},
                          role("decode", 1)), "role prefill's templates change", []),
]


@pytest.mark.parametrize(("new", "cause", "scaled"), [c[1:] for c in CAUSES],
                         ids=[c[0] for c in CAUSES])
def test_what_rolls(new: dict[str, Any], cause: str | None, scaled: list[str]) -> None:
    got = rollout_cause(LIVE, new)
    if cause is None:
        assert got is None
    else:
        assert got is not None
        assert got.startswith(cause)
    assert replicas_change(LIVE, new) == scaled


def child(name: str, replicas: int) -> dict[str, Any]:
    return {"metadata": {
        "name": f"dis-0-cur-{name}", "labels": {
            "disaggregatedset.x-k8s.io/name": "dis", "disaggregatedset.x-k8s.io/role": name,
            "disaggregatedset.x-k8s.io/revision": "cur", "disaggregatedset.x-k8s.io/slice": "0"},
        "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": "dis",
                             "uid": "u", "controller": True}]},
        "spec": {"replicas": replicas}, "status": {"readyReplicas": replicas}}


def test_the_step_table() -> None:
    new = copy.deepcopy(LIVE)
    rollout = proposed_rollout(new, [child("prefill", 2), child("decode", 1)], "next", 0)
    assert step_table(rollout, Paint(False), mark=False) == [
        "STEP  PREFILL OLD|NEW  DECODE OLD|NEW  ACTION",
        "0     2|0              1|0             start",
        "1     2|1              1|1             scale up new",
        "2     1|1              1|1             drain old",
        "3     1|2              1|1             scale up new",
        "4     0|2              0|1             final drain",
    ]
    marked = step_table(rollout, Paint(False), mark=True)
    assert marked[1].endswith("start  ◀ now")
    assert not marked[2].endswith("◀ now")
