"""The shared runner's reads (``controllers.passes.PassRunner``): a step asked again on a fresh
snapshot may need one more object, because the caches moved on while it read (a leader
scheduled while its group's Node was read: found by upstream's exclusive-placement sample)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from lws_operator.controllers.passes import READ_ROUNDS, PassRunner
from lws_operator.kube.executor import Executor, Outcome
from lws_operator.logic.plan import EMPTY, Plan, Read


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
