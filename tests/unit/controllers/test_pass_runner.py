"""The shared runner (``controllers.passes.PassRunner``). The pass function's ``run``: a fresh
snapshot per step, the step's value handed back, a stopping plan ends the pass where it stands.
Its reads: a step asked again on a fresh snapshot may need one more object, because the caches
moved on while it read (a leader scheduled while its group's Node was read: found by upstream's
exclusive-placement sample). Its end when the set itself is deleted mid-pass: a 404 naming the
set is "gone", not a failure."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from lws_operator.controllers.passes import (
    READ_ROUNDS,
    PassEnds,
    PassRunner,
    owner_not_found,
    plan_through,
)
from lws_operator.kube.client import ApiException
from lws_operator.kube.executor import Executor, Outcome
from lws_operator.logic.reconcile.plan import (
    CONFLICT_STOPS,
    EMPTY,
    Common,
    Create,
    Plan,
    Planned,
    Read,
    Run,
    Target,
)


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

    def observe(collected: tuple[str, ...],
                fetched: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        i = next(snapshots)
        return {"nodes": nodes_seen[min(i, len(nodes_seen) - 1)], "fetched": dict(fetched)}

    def step(obs: dict[str, Any]) -> Plan:
        missing = [n for n in obs["nodes"] if n not in obs["fetched"]]
        return Plan(reads=tuple(Read(n) for n in missing)) if missing else EMPTY

    async def one_step(run: Run[dict[str, Any]]) -> None:
        await run(step)

    ran = asyncio.run(PassRunner(executor).run(one_step, observe, lambda _obs: {}))
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
    async def three(run: Run[dict[str, Any]]) -> None:
        await run(lambda _obs: Plan(requeue_after=5.0))
        await run(lambda _obs: EMPTY)
        await run(lambda _obs: EMPTY)

    return PassRunner(_Fails(exc)).run(three, lambda *_: {}, lambda _obs: {},
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


class _Carries(_Reads):
    """Carries every plan out as nothing, stopping where the plan says so."""


def test_values_go_from_step_to_step_and_a_stop_ends_the_pass_where_it_stands() -> None:
    """Each step reads a fresh snapshot, its value comes back to the pass function, which hands
    it on; a stopping plan ends the pass: the function does not get past it, and its hooks have
    seen the stopping plan."""
    executor = _Carries()
    snapshots = iter(range(100))
    seen: list[tuple[str, Any]] = []
    adopted: list[Plan] = []
    settled: list[Plan] = []

    def count(obs: int) -> Planned[int]:
        seen.append(("count", obs))
        return Planned(Plan(requeue_after=7.0), 40 + obs)

    def add(obs: int, value: int, more: int) -> Planned[int]:
        seen.append(("add", obs))
        return Planned(EMPTY, value + more)

    def stop(obs: int, value: int) -> Plan:
        seen.append(("stop", value))
        return Plan(stop=True, requeue_after=3.0)

    async def three(run: Run[int]) -> int:
        value = await run(count)
        value = await run(add, value, more=2)
        await run(stop, value)
        raise AssertionError("a stopped pass went on")

    ran = asyncio.run(PassRunner(executor).run(
        three, lambda *_: next(snapshots), lambda _obs: {}, adopt=adopted.append,
        settle=lambda plan, _outcome: settled.append(plan)))
    assert seen == [("count", 0), ("add", 1), ("stop", 42)]
    assert ran.stopped
    assert not ran.gone
    assert ran.result is None
    assert (ran.requeue_after, ran.soonest) == (3.0, 3.0)
    assert adopted == settled == executor.executed
    assert len(executor.executed) == 3


def test_a_pass_that_runs_to_its_end_returns_its_result() -> None:
    async def one(run: Run[int]) -> str:
        value = await run(lambda _obs: Planned(EMPTY, "done"))
        return value

    ran = asyncio.run(PassRunner(_Carries()).run(one, lambda *_: 1, lambda _obs: {}))
    assert ran.result == "done"
    assert not ran.stopped
    assert not ran.gone


def test_the_owner_gone_ends_the_pass_as_gone() -> None:
    async def two(run: Run[int]) -> None:
        await run(lambda _obs: EMPTY)
        await run(lambda _obs: EMPTY)

    snapshots = iter([1, None])
    executor = _Carries()
    ran = asyncio.run(PassRunner(executor).run(two, lambda *_: next(snapshots),
                                               lambda _obs: {}))
    assert ran.gone
    assert not ran.stopped
    assert ran.result is None
    assert executor.executed == [EMPTY]


def test_plan_through_runs_a_pass_whose_run_never_waits() -> None:
    async def run(step: Any, /, *args: Any) -> Any:
        plan = step(0, *args)
        if plan.stop:
            raise PassEnds(gone=False)
        return None

    async def ends(run: Any) -> str:
        await run(lambda _obs: EMPTY)
        await run(lambda _obs: Plan(stop=True))
        return "not reached"

    async def ok(run: Any) -> str:
        await run(lambda _obs: EMPTY)
        return "end"

    assert plan_through(ends(run)) is None
    assert plan_through(ok(run)) == "end"

    async def waits() -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError):
        plan_through(waits())


class _Gated(Executor):
    """An executor whose overlapping plan is answered only once a later plan was carried out:
    a runner that waited for the overlapping plan's answer before going on would hang."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.later_done = asyncio.Event()
        self.order: list[str] = []
        self.fail = fail

    async def execute(self, plan: Plan, regarding: Mapping[str, Any]) -> Outcome:
        if plan.overlap:
            await self.later_done.wait()
            self.order.append("overlapping answered")
            if self.fail is not None:
                raise self.fail
            return Outcome(requeue_after=plan.requeue_after)
        self.order.append("later carried out")
        self.later_done.set()
        return Outcome(requeue_after=plan.requeue_after)


async def _overlapping_pass(executor: _Gated, *, overlap_requeue: float | None = None,
                            later_requeue: float | None = None) -> Any:
    def observe(collected: tuple[str, ...], fetched: Mapping[str, dict[str, Any]]) -> Any:
        return {}

    async def pass_(run: Run[Any]) -> str:
        first = await run(lambda _obs: Planned(
            Plan(overlap=True, requeue_after=overlap_requeue), "value of the first"))
        await run(lambda _obs: Plan(requeue_after=later_requeue))
        executor.order.append("pass function returned")
        return str(first)

    return await asyncio.wait_for(
        PassRunner(executor).run(pass_, observe, lambda obs: obs), timeout=5)


async def test_an_overlapping_plan_does_not_hold_the_steps_after_it() -> None:
    executor = _Gated()
    ran = await _overlapping_pass(executor, overlap_requeue=7.0, later_requeue=30.0)
    assert ran.result == "value of the first"
    assert executor.order == ["later carried out", "pass function returned",
                              "overlapping answered"]
    # The last plan's requeue stays the last one carried out in order; the soonest counts both.
    assert (ran.requeue_after, ran.soonest) == (30.0, 7.0)


async def test_an_overlapping_plan_that_fails_fails_the_pass_at_its_end() -> None:
    executor = _Gated(fail=ApiException(status=500, reason="Internal Server Error"))
    with pytest.raises(ApiException):
        await _overlapping_pass(executor)
    assert executor.order == ["later carried out", "pass function returned",
                              "overlapping answered"]


def test_a_plan_that_may_end_the_pass_cannot_overlap() -> None:
    with pytest.raises(ValueError, match="cannot overlap"):
        Plan(stop=True, overlap=True)
    stops = Create(Target("/c", "Thing"), {},
                   common=Common(policy=CONFLICT_STOPS))
    with pytest.raises(ValueError, match="cannot overlap"):
        Plan((stops,), overlap=True)
