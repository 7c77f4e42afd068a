"""``kubectl lws rollout history|undo``'s shell over canned answers (the live behaviour is
``e2e/plugin/test_rollout_history.py``'s and ``test_ds_rollout_history_live.py``'s): a missing
set names what was looked for, the undo writes one guarded merge patch, for a LeaderWorkerSet
and a DisaggregatedSet alike, and a revision not kept is refused naming those that are."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest

from lws_operator.api.constants import CHANGE_CAUSE_ANNOTATION
from lws_operator.logic.disaggregated import history as ds_history
from lws_operator.logic.disaggregated.revision import compute_revision
from lws_operator.logic.identity.revision import revision_key
from lws_operator.logic.identity.revision_decision import controller_revision
from lws_operator.plugin.cli import Session, build_parser
from lws_operator.plugin.rollout import history, undo
from lws_operator.plugin.rollout.target import path_of

NS = "ns"


def lws(image: str) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "s", "namespace": NS, "uid": "u-1", "resourceVersion": "9",
                         "annotations": {CHANGE_CAUSE_ANNOTATION: image}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                "spec": {"containers": [{"name": "m", "image": image}]}}}}}


def revision(image: str, number: int) -> dict[str, Any]:
    body = lws(image)
    out = controller_revision(body, revision_key(body), [])
    out["revision"] = number
    return out


class Canned:
    """Answers GETs from ``objects`` by path and records every other request."""

    def __init__(self, objects: dict[str, Any]) -> None:
        self.objects = objects
        self.sent: list[tuple[str, str, Any]] = []

    async def get(self, path: str) -> Any:
        return self.objects.get(path)

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "GET":
            return self.objects[path]
        self.sent.append((method, path, kwargs.get("body")))
        return {}


def run(kube: Canned, *argv: str) -> int:
    args = build_parser().parse_args(["rollout", *argv])
    session = Session(kube, NS, False)  # type: ignore[arg-type]
    result: int = asyncio.run(args.run(session, args))
    return result


def ds(image: str) -> dict[str, Any]:
    def role(name: str) -> dict[str, Any]:
        return {"name": name, "spec": {"replicas": 2, "leaderWorkerTemplate": {
            "size": 1, "workerTemplate": {"spec": {"containers": [
                {"name": "m", "image": image}]}}}}}
    return {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
            "metadata": {"name": "s", "namespace": NS, "uid": "ds-1", "resourceVersion": "7",
                         "annotations": {CHANGE_CAUSE_ANNOTATION: image}},
            "spec": {"roles": [role("prefill"), role("decode")]}}


def ds_revision(image: str, number: int) -> dict[str, Any]:
    body = ds(image)
    out = ds_history.controller_revision(body, compute_revision(body), [])
    out["revision"] = number
    return out


def test_a_disaggregatedsets_history_and_undo(capsys: pytest.CaptureFixture[str]) -> None:
    path = path_of("disaggregatedset", NS, "s")
    kube = Canned({path: ds("app:2"), history.revisions_path(NS): {"items": [
        ds_revision("app:1", 1), ds_revision("app:2", 2)]}})
    assert run(kube, "history", "s") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "disaggregatedset.disaggregatedset.x-k8s.io/s"
    assert [line.split()[0] for line in out[2:]] == ["1", "2"]
    assert "(current)" in out[3]
    assert run(kube, "history", "s", "--revision=1", "-o", "json") == 0
    assert '"image": "app:1"' in capsys.readouterr().out

    assert run(kube, "undo", "s", "--to-revision=5") == 1
    assert capsys.readouterr().err == (
        'error: revision 5 of DisaggregatedSet "s" does not exist (pruned beyond the history '
        "limit, or never made); revisions kept: 1, 2\n")
    assert run(kube, "undo", "s", "--dry-run") == 0
    assert capsys.readouterr().out == ("disaggregatedset.disaggregatedset.x-k8s.io/s would roll "
                                       "back to revision 1 (dry run)\n")
    assert kube.sent == []
    assert run(kube, "undo", "s") == 0
    assert capsys.readouterr().out == (
        "disaggregatedset.disaggregatedset.x-k8s.io/s rolled back to revision 1\n")
    ((method, target, body),) = kube.sent
    assert (method, target) == ("PATCH", path)
    assert body["metadata"] == {"resourceVersion": "7",
                                "annotations": {CHANGE_CAUSE_ANNOTATION: "app:1"}}
    assert body["spec"]["roles"] == ds("app:1")["spec"]["roles"]


def test_a_missing_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(Canned({}), "history", "s") == 1
    assert capsys.readouterr().err == (
        'error: leaderworkerset or disaggregatedset "s" not found in namespace "ns"\n')


def test_undo_writes_one_guarded_patch(capsys: pytest.CaptureFixture[str]) -> None:
    live = lws("app:2")
    path = path_of("leaderworkerset", NS, "s")
    kube = Canned({path: live, history.revisions_path(NS): {"items": [
        revision("app:1", 1), revision("app:2", 2)]}})
    assert run(kube, "undo", "s") == 0
    assert capsys.readouterr().out == (
        "leaderworkerset.leaderworkerset.x-k8s.io/s rolled back to revision 1\n")
    ((method, target, body),) = kube.sent
    assert (method, target) == ("PATCH", path)
    assert body["metadata"] == {"resourceVersion": "9",
                                "annotations": {CHANGE_CAUSE_ANNOTATION: "app:1"}}
    assert run(kube, "undo", "s", "--to-revision=2") == 0
    assert "skipped rollback" in capsys.readouterr().out
    assert run(kube, "undo", "s", "--dry-run") == 0
    assert len(kube.sent) == 1


def test_the_parsers() -> None:
    args = build_parser().parse_args(["rollout", "history", "s", "--revision=3", "-o", "json"])
    assert (args.revision, args.output, args.run) == (3, "json", history.run)
    args = build_parser().parse_args(["rollout", "undo", "s", "--to-revision", "2"])
    assert (args.to_revision, args.dry_run, args.run) == (2, False, undo.run)
    assert isinstance(args, argparse.Namespace)
