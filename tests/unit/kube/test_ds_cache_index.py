"""The DisaggregatedSet controller's cache index: a child belongs to the set its name label
names only when a controller ownerReference to a DisaggregatedSet of that name confirms it."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.disaggregated import API_VERSION, KIND, NAME_LABEL
from lws_operator.kube.cache import ds_owner_key


def child(label: str | None, **ref: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "c", "namespace": "ns"}
    if label is not None:
        meta["labels"] = {NAME_LABEL: label}
    if ref:
        meta["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": KIND, "name": "llm",
                                    "uid": "u", "controller": True, **ref}]
    return {"metadata": meta}


@pytest.mark.parametrize(("obj", "owner"), [
    (child("llm", uid="u"), ("ns", "llm")),
    (child("llm", uid="another"), ("ns", "llm")),  # the UID is the pass's to check
    (child("llm"), None),  # the label alone: hand-made
    (child("llm", name="other"), None),
    (child("llm", controller=False), None),
    (child("llm", kind="LeaderWorkerSet"), None),
    (child("llm", apiVersion="example.com/v1"), None),
    (child(None, uid="u"), None),
], ids=["owned", "namesake", "label-only", "other-name", "not-controller", "other-kind",
        "other-group", "no-label"])
def test_children_are_indexed_under_their_confirmed_set(obj: dict[str, Any],
                                                        owner: tuple[str, str] | None) -> None:
    assert ds_owner_key("LeaderWorkerSet", obj) == owner


def test_a_set_is_indexed_under_itself() -> None:
    ds = {"metadata": {"name": "llm", "namespace": "ns"}}
    assert ds_owner_key(KIND, ds) == ("ns", "llm")
