"""Whether an object is controlled by a given owner."""

from __future__ import annotations

from lws_operator.logic.objects.owners import owned_by


def test_owned_by() -> None:
    owner = {"metadata": {"uid": "p-1"}}
    assert owned_by({"metadata": {"ownerReferences": [{"uid": "p-1", "controller": True}]}}, owner)
    assert not owned_by({"metadata": {"ownerReferences": [{"uid": "p-2", "controller": True}]}},
                        owner)
    assert not owned_by({"metadata": {}}, owner)
