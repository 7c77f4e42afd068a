"""The shared runner (``controllers.passes.PassRunner``). Its reads: a step asked again on a
fresh snapshot may need one more object, because the caches moved on while it read (a leader
scheduled while its group's Node was read: found by upstream's exclusive-placement sample). Its
end when the set itself is deleted mid-pass: a 404 naming the set is "gone", not a failure."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from lws_operator.controllers.passes import READ_ROUNDS, PassRunner, owner_not_found
from lws_operator.kube.client import ApiException
from lws_operator.kube.executor import Executor, Outcome
from lws_operator.logic.reconcile.plan import EMPTY, Plan, Read


class _Reads(Executor):
    """An executor that answers reads with the path and carries plans out as nothing (the
    runner is under test, not the writes)."""

    def __init__(self) -> None:  # no client: nothing is sent
        self.read_rounds: list[tuple[str, ...]] = []
        self.executed: list[Plan] = []

    async def read(self, reads: tuple[Read, ...]) -> dict[str, dict[str, Any]]:
        self.read_rounds.append(tuple(r.path for r in reads))
        return {r.path: {"path": r.path} for r in reads}

    async def execute(self, plan: Plan, regarding: Mapping[str, Any]) -> Outcome:
        self.executed.append(plan)
        return Outcome(stop=plan.stop, requeue_after=plan.requeue_after)


def _run(nodes_seen: list[list[str]]) -> tuple[_Reads, Any]:
    """One step that needs every node the snapshot shows; snapshot ``i`` shows
    ``nodes_seen[min(i, last)]`` (the caches move on between snapshots)."""
    executor = _Reads()
    snapshots = iter(range(100))

    def observe(decided: None, collected: tuple[str, ...],
                fetched: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        i = next(snapshots)
        return {"nodes": nodes_seen[min(i, len(nodes_seen) - 1)], "fetched": dict(fetched)}

    def step(obs: dict[str, Any]) -> Plan:
        missing = [n for n in obs["nodes"] if n not in obs["fetched"]]
        return Plan(reads=tuple(Read(n) for n in missing)) if missing else EMPTY

    ran = asyncio.run(PassRunner(executor).run([step], observe, None, lambda _obs: {}))
    return executor, ran


def test_a_step_is_asked_again_with_what_it_read() -> None:
    executor, ran = _run([["n1"]])
    assert executor.read_rounds == [("n1",)]
    assert executor.executed == [EMPTY]
    assert not ran.stopped


def test_a_node_that_appears_while_reading_is_read_too() -> None:
    executor, ran = _run([["n1"], ["n1", "n2"]])
    assert executor.read_rounds == [("n1",), ("n2",)]
    assert executor.executed == [EMPTY]
    assert not ran.stopped


def test_a_step_that_keeps_asking_ends_the_pass_and_looks_again() -> None:
    executor, ran = _run([[f"n{j}" for j in range(i + 1)] for i in range(10)])
    assert len(executor.read_rounds) == READ_ROUNDS
    assert ran.stopped
    assert ran.requeue_after == 1.0


def _not_found(kind: str, name: str) -> ApiException:
    """The API server's 404 as the client raises it: a Status naming what is missing."""
    exc = ApiException(status=404, reason="Not Found")
    exc.body = json.dumps({"kind": "Status", "status": "Failure", "reason": "NotFound",
                           "code": 404, "message": f'{kind}.x "{name}" not found',
                           "details": {"name": name, "group": "x", "kind": kind}})
    return exc


class _Fails(_Reads):
    """Carries the first plan out, then answers the second with ``exc``."""

    def __init__(self, exc: ApiException) -> None:
        super().__init__()
        self.exc = exc

    async def execute(self, plan: Plan, regarding: Mapping[str, Any]) -> Outcome:
        self.executed.append(plan)
        if len(self.executed) == 2:
            raise self.exc
        return Outcome(requeue_after=5.0)


def _two_steps(exc: ApiException) -> Any:
    steps = [lambda _obs: Plan(requeue_after=5.0), lambda _obs: EMPTY, lambda _obs: EMPTY]
    return PassRunner(_Fails(exc)).run(steps, lambda *_: {}, None, lambda _obs: {},
                                       owner=("leaderworkersets", "sample"))


def test_a_404_for_the_set_itself_ends_the_pass_as_gone(caplog: pytest.LogCaptureFixture,
                                                         ) -> None:
    """The set deleted while its pass runs: its next write answers 404. Not a failure (the
    worker would log "reconcile failed, retrying" and back off): the pass ends as gone, with a
    debug line only."""
    with caplog.at_level(logging.DEBUG, logger="lws_operator.controllers.passes"):
        ran = asyncio.run(_two_steps(_not_found("leaderworkersets", "sample")))
    assert ran.gone
    assert not ran.stopped
    assert ran.requeue_after is None
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "leaderworkersets sample was deleted during its pass; the pass ends")]


@pytest.mark.parametrize("exc", [
    _not_found("statefulsets", "sample"),  # a child of the set: the plan's policy decides
    _not_found("leaderworkersets", "other"),  # another set of the same kind
    ApiException(status=404, reason="Not Found"),  # no Status body: nothing names the set
    ApiException(status=409, reason="Conflict"),
], ids=["child", "other-set", "no-body", "conflict"])
def test_any_other_error_still_fails_the_pass(exc: ApiException) -> None:
    with pytest.raises(ApiException) as raised:
        asyncio.run(_two_steps(exc))
    assert raised.value is exc


def test_owner_not_found_reads_the_status_details() -> None:
    assert owner_not_found(_not_found("leaderworkersets", "a"), ("leaderworkersets", "a"))
    assert not owner_not_found(_not_found("leaderworkersets", "a"), ("disaggregatedsets", "a"))
    assert not owner_not_found(ValueError("404"), ("leaderworkersets", "a"))
    broken = ApiException(status=404, reason="Not Found")
    broken.body = "not json"
    assert not owner_not_found(broken, ("leaderworkersets", "a"))
