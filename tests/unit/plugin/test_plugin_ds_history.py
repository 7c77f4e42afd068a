"""``kubectl lws rollout history|undo`` of a DisaggregatedSet without the API
(``plugin.analysis.ds_history``): which revision the set runs, the rows, where an undo goes and
what it writes."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import CHANGE_CAUSE_ANNOTATION
from lws_operator.api.disaggregated import REVISION_LABEL
from lws_operator.logic.disaggregated import history
from lws_operator.logic.disaggregated.revision import compute_revision
from lws_operator.plugin.analysis import ds_history
from lws_operator.plugin.analysis.revision_history import NoSuchRevision


def ds(image: str = "app:1", cause: str | None = None, uid: str = "ds-1") -> dict[str, Any]:
    def role(name: str) -> dict[str, Any]:
        return {"name": name, "spec": {"replicas": 2, "leaderWorkerTemplate": {
            "size": 1, "workerTemplate": {"spec": {"containers": [
                {"name": "m", "image": image}]}}}}}
    annotations = {} if cause is None else {CHANGE_CAUSE_ANNOTATION: cause}
    return {"metadata": {"name": "s", "namespace": "ns", "uid": uid, "resourceVersion": "3",
                         "annotations": annotations},
            "spec": {"roles": [role("prefill"), role("decode")]}}


def rev(image: str, number: int, cause: str | None = None, key: str | None = None,
        owner: str = "ds-1") -> dict[str, Any]:
    body = ds(image, cause, owner)
    out = history.controller_revision(body, key or compute_revision(body), [])
    out["revision"] = number
    return out


HISTORY = [rev("app:2", 2, "two"), rev("app:1", 1, "one"), rev("app:3", 3, "three"),
           rev("app:9", 9, owner="another-set")]


@pytest.mark.parametrize(("image", "current"), [("app:1", 1), ("app:2", 2), ("app:3", 3),
                                                ("app:4", None)])
def test_the_rows_oldest_first_the_running_one_marked(image: str, current: int | None) -> None:
    got = ds_history.rows(ds(image), HISTORY)
    assert [(r.number, r.cause) for r in got] == [(1, "one"), (2, "two"), (3, "three")]
    assert [r.number for r in got if r.current] == ([] if current is None else [current])


def test_a_revision_under_a_taken_over_key_is_found_by_its_roles() -> None:
    """The key of children the upstream controller made is not our hash: the stored roles are
    compared instead."""
    adopted = rev("app:1", 1, key="0a1b2c3d")
    assert adopted["metadata"]["labels"][REVISION_LABEL] == "0a1b2c3d"
    (row,) = ds_history.rows(ds("app:1"), [adopted])
    assert (row.key, row.current) == ("0a1b2c3d", True)


@pytest.mark.parametrize(("image", "to", "number", "already"), [
    ("app:3", None, 2, False),   # the previous one: the highest not running
    ("app:1", None, 3, False),
    ("app:3", 1, 1, False),
    ("app:3", 3, 3, True),       # running it already
])
def test_where_an_undo_goes(image: str, to: int | None, number: int, already: bool) -> None:
    choice = ds_history.undo_target(ds(image), HISTORY, to)
    assert (choice.target["revision"], choice.already) == (number, already)


@pytest.mark.parametrize(("revisions", "to", "message"), [
    (HISTORY, 9, 'revision 9 of DisaggregatedSet "s" does not exist (pruned beyond the history '
                 "limit, or never made); revisions kept: 1, 2, 3"),
    ([rev("app:1", 1)], None, 'DisaggregatedSet "s" has no previous revision to undo to; '
                              "revisions kept: 1"),
    ([], None, 'DisaggregatedSet "s" has no previous revision to undo to; revisions kept: none'),
])
def test_refused(revisions: list[dict[str, Any]], to: int | None, message: str) -> None:
    with pytest.raises(NoSuchRevision) as caught:
        ds_history.undo_target(ds("app:1"), revisions, to)
    assert str(caught.value) == message


def test_the_undo_patch() -> None:
    live = ds("app:3", "three")
    live["spec"]["roles"][0]["spec"]["replicas"] = 5
    body = ds_history.undo_patch(live, rev("app:1", 1))
    assert body["metadata"] == {"resourceVersion": "3",
                                "annotations": {CHANGE_CAUSE_ANNOTATION: None}}
    roles = body["spec"]["roles"]
    assert [r["spec"]["replicas"] for r in roles] == [5, 2]
    assert compute_revision({"spec": {"roles": roles}}) == compute_revision(ds("app:1"))
    assert ds_history.roles(rev("app:1", 1))["roles"][0]["template"]["size"] == 1
