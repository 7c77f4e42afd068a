"""Revision decisions (upstream's Reconcile, leaderworkerset_controller.go)."""

from __future__ import annotations

import copy
from typing import Any

from lws_operator.logic.identity.history import revision_for_key
from lws_operator.logic.identity.revision import revision_key
from lws_operator.logic.identity.revision_decision import (
    controller_revision,
    decide_revision,
)

HASH = "leaderworkerset.sigs.k8s.io/template-revision-hash"


def lws(image: str = "nginx:1") -> dict[str, Any]:
    return {
        "metadata": {"name": "sample", "namespace": "ns", "uid": "u-1"},
        "spec": {"replicas": 2, "networkConfig": {"subdomainPolicy": "Shared"},
                 "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [
                     {"name": "m", "image": image}]}}}},
    }


def sts(key: str) -> dict[str, Any]:
    return {"metadata": {"name": "sample", "labels": {HASH: key}}}


def test_new_lws_creates_its_first_revision() -> None:
    decision = decide_revision(lws(), None, [])
    assert decision.current_key == revision_key(lws())
    assert decision.updated is False
    assert decision.create is not None
    assert decision.create["metadata"]["name"] == f"sample-{decision.current_key}-1"
    assert decision.create["metadata"]["labels"][HASH] == decision.current_key
    assert decision.create["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert [e.note for e in decision.events] == [
        f"Creating revision with key {decision.current_key} for a newly created LeaderWorkerSet"]


def test_nothing_to_do_at_rest() -> None:
    key = revision_key(lws())
    revision = controller_revision(lws(), key, [])
    decision = decide_revision(lws(), sts(key), [revision])
    assert (decision.current_key, decision.create, decision.updated) == (key, None, False)
    assert decision.events == ()


def test_template_change_is_an_update_with_a_numbered_revision() -> None:
    old_key = revision_key(lws())
    old = controller_revision(lws(), old_key, [])
    decision = decide_revision(lws("nginx:2"), sts(old_key), [old])
    assert decision.updated is True
    assert decision.current_key == revision_key(lws("nginx:2"))
    assert decision.create is not None
    assert decision.create["revision"] == 2
    assert decision.events[0].note.endswith("for updated LWS")


def test_going_back_reuses_the_existing_revision() -> None:
    first = controller_revision(lws(), revision_key(lws()), [])
    second = controller_revision(lws("nginx:2"), revision_key(lws("nginx:2")), [first])
    decision = decide_revision(lws(), sts(revision_key(lws("nginx:2"))), [first, second])
    assert (decision.current_key, decision.create, decision.updated) == (
        revision_key(lws()), None, True)


def test_missing_revision_is_recreated_under_the_statefulsets_key() -> None:
    decision = decide_revision(lws(), sts("legacy"), [])
    assert decision.current_key == "legacy"
    assert decision.create is not None
    assert decision.create["metadata"]["labels"][HASH] == "legacy"
    assert decision.updated is False


def test_replicas_and_metadata_do_not_make_an_update() -> None:
    key = revision_key(lws())
    revision = controller_revision(lws(), key, [])
    scaled = copy.deepcopy(lws())
    scaled["spec"]["replicas"] = 9
    scaled["metadata"]["annotations"] = {"a": "b"}
    assert decide_revision(scaled, sts(key), [revision]).updated is False


def test_revision_for_key_takes_the_highest_number() -> None:
    a = {"metadata": {"labels": {HASH: "k"}}, "revision": 1}
    b = {"metadata": {"labels": {HASH: "k"}}, "revision": 3}
    assert revision_for_key([a, b], "k") is b
    assert revision_for_key([a, b], "x") is None
