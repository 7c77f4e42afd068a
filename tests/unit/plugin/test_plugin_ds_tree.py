"""``kubectl lws tree`` of a DisaggregatedSet: the model (``plugin.analysis.ds_tree``) from
hand-made children, Services and trees, and its drawing."""

from __future__ import annotations

from typing import Any

from lws_operator.api.constants import NAME_LABEL as LWS_NAME_LABEL
from lws_operator.api.constants import (
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.disaggregated import (
    API_VERSION,
    KIND,
    NAME_LABEL,
    REVISION_LABEL,
    ROLE_LABEL,
    SLICE_LABEL,
)
from lws_operator.plugin.analysis.ds_tree import build_ds_tree, ds_tree_data
from lws_operator.plugin.analysis.group_tree import build_tree
from lws_operator.plugin.output import Paint
from lws_operator.plugin.tree import as_data, render_all, render_ds

UID = "u1"


def ds() -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "dis", "namespace": "ns", "uid": UID},
            "spec": {"roles": [{"name": "prefill"}, {"name": "decode"}]},
            "status": {"roleStatuses": [
                {"name": "prefill", "replicas": 2, "readyReplicas": 1, "updatedReplicas": 1},
                {"name": "decode", "replicas": 1, "readyReplicas": 1}],
                "conditions": [{"type": "Progressing", "status": "True"}]}}


def owned_by(uid: str) -> list[dict[str, Any]]:
    return [{"apiVersion": API_VERSION, "kind": KIND, "name": "dis", "uid": uid,
             "controller": True}]


def child(role: str, revision: str, slice_index: int = 0, uid: str = UID) -> dict[str, Any]:
    return {"metadata": {"name": f"dis-{slice_index}-{revision}-{role}", "namespace": "ns",
                         "labels": {NAME_LABEL: "dis", ROLE_LABEL: role, REVISION_LABEL: revision,
                                    SLICE_LABEL: str(slice_index)},
                         "ownerReferences": owned_by(uid)},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1}},
            "status": {"readyReplicas": 1, "updatedReplicas": 1}}


def leader(lws: str, revision: str = "t1") -> dict[str, Any]:
    return {"metadata": {"name": f"{lws}-0", "labels": {
        LWS_NAME_LABEL: lws, "leaderworkerset.sigs.k8s.io/group-index": "0",
        WORKER_INDEX_LABEL: "0", TEMPLATE_REVISION_HASH_LABEL: revision}},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def service(lws: str, role: str, revision: str, uid: str = UID) -> dict[str, Any]:
    return {"metadata": {"name": f"{lws}-prv", "labels": {
        NAME_LABEL: "dis", ROLE_LABEL: role, REVISION_LABEL: revision},
        "ownerReferences": owned_by(uid)}}


CHILDREN = [child("decode", "old"), child("prefill", "new"), child("prefill", "old"),
            child("decode", "new"), child("prefill", "new", slice_index=1),
            child("prefill", "new", uid="someone-else") | {"metadata": {
                "name": "hand-made", "labels": {NAME_LABEL: "dis", ROLE_LABEL: "prefill"},
                "ownerReferences": owned_by("someone-else")}}]
SERVICES = [service("dis-0-new-prefill", "prefill", "new"),
            service("hand-made", "prefill", "new", uid="x")]


def model() -> Any:
    names = [c["metadata"]["name"] for c in CHILDREN]
    pods = [leader(n) for n in names]
    sts = {"metadata": {"labels": {TEMPLATE_REVISION_HASH_LABEL: "t1"}}}
    trees = {c["metadata"]["name"]: build_tree(c, pods, sts) for c in CHILDREN}
    return build_ds_tree(ds(), "new", CHILDREN, trees, SERVICES)


def test_children_by_slice_target_first_then_role_order_and_only_owned() -> None:
    node = model()
    assert [(c.slice, c.revision, c.role, c.current) for c in node.children] == [
        (0, "new", "prefill", True), (0, "new", "decode", True),
        (0, "old", "prefill", False), (0, "old", "decode", False),
        (1, "new", "prefill", True)]
    assert [s.name for s in node.services] == ["dis-0-new-prefill-prv"]
    assert [len(c.tree.groups) for c in node.children] == [1] * 5


def test_data_has_the_kind_the_children_and_the_services() -> None:
    data = ds_tree_data(model())
    assert data["kind"] == "DisaggregatedSet"
    assert data["roles"] == ["prefill", "decode"]
    assert data["revision"] == "new"
    assert data["conditions"] == {"Progressing": "True"}
    first = data["leaderWorkerSets"][0]
    assert (first["role"], first["slice"], first["revision"], first["current"],
            first["tree"]["name"]) == ("prefill", 0, "new", True, "dis-0-new-prefill")
    assert first["tree"]["groups"][0]["pods"][0]["name"] == "dis-0-new-prefill-0"
    assert data["services"] == [{"name": "dis-0-new-prefill-prv", "role": "prefill",
                                 "revision": "new"}]
    assert as_data([model()], single=False)["items"][0]["kind"] == "DisaggregatedSet"


def test_drawing() -> None:
    lines = render_ds(model(), Paint(False))
    assert lines[0] == ("DisaggregatedSet ns/dis  (roles prefill ready 1/2, decode ready 1/1; "
                        "slices 1; revision new)  Progressing=True")
    assert lines[1].startswith("├── role prefill  slice 0  revision new: LeaderWorkerSet "
                               "ns/dis-0-new-prefill  (Ordinal;")
    assert lines[2] == "│   └── group 0  Ready  revision t1"
    assert any(line.startswith("├── role prefill  slice 0  revision old (old): ")
               for line in lines)
    assert lines[-1] == "└── Service dis-0-new-prefill-prv  (headless; role prefill, " \
        "revision new)"
    assert render_all([], Paint(False)) == "No LeaderWorkerSets or DisaggregatedSets found.\n"


def test_a_set_without_children() -> None:
    node = build_ds_tree(ds(), "new", [], {}, [])
    assert render_ds(node, Paint(False))[1:] == ["└── (no LeaderWorkerSets)"]
