"""The steps the runner skips by a set's configuration (``logic.reconcile.pipeline.NEEDED``) would
have planned nothing: every step of passes over sets of each configuration is run, skipped or
not, and a step the table calls unneeded must return an empty plan. Each skippable step also
plans something where it is needed, so a skip that covered too much would fail here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lws_operator.logic.reconcile.pipeline import NEEDED, Step, needed, skipped
from lws_operator.logic.reconcile.plan import EMPTY, Plan
from lws_operator.logic.reconcile.snapshot import Observed, Options
from tests.harness.lws_world import (
    GATE,
    World,
    at_rest,
    built_world,
    manifest,
    new_world,
    plan_pass,
)


def _gated(pod: dict[str, Any]) -> None:
    pod["spec"]["schedulingGates"] = [GATE]


def _not_ready(pod: dict[str, Any]) -> None:
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False"


def _leader_gone(world: World) -> World:
    """Group 1's leader deleted, its worker StatefulSet still there."""
    leader = world.cache["Pod"].get("ns", "sample-1")
    assert leader is not None
    world.cache["Pod"].delete(leader, gone=True)
    return world


def _options(world: World, **options: Any) -> World:
    world.options = Options(600.0, **options)
    return world


GANG: dict[str, Any] = {"schedulingPolicy": {"gang": {}}}

# Sets of every configuration the table tells apart, in states where steps have work.
WORLDS: dict[str, Callable[[], World]] = {
    "Ordinal, created": lambda: new_world(manifest()),
    "Ordinal, a group not ready": lambda: built_world(manifest(), states={"1/1": _not_ready}),
    "Ordinal at rest": lambda: at_rest(built_world(manifest())),
    "Ordinal, a leader gone": lambda: _leader_gone(at_rest(built_world(manifest()))),
    "Ordinal Parallel, a leader gone": lambda: _leader_gone(at_rest(built_world(
        manifest(podTerminationPolicy="Parallel")))),
    "Hash, created": lambda: new_world(manifest(size=2, groupIdentity="Hash")),
    "Hash, a gated leader": lambda: built_world(manifest(size=2, groupIdentity="Hash"),
                                                states={"1/0": _gated}),
    "native gang, created": lambda: new_world(manifest(size=2, scheduling=GANG)),
    "native gang, built": lambda: built_world(manifest(size=2, scheduling=GANG)),
    "native gang, API not served": lambda: _options(
        new_world(manifest(size=2, scheduling=GANG)), native_scheduling=False),
    "volcano, built": lambda: _options(built_world(manifest(size=2, replicas=1),
                                                   provider="volcano"), provider="volcano"),
    "volcano, created": lambda: _options(new_world(manifest(size=2)), provider="volcano"),
}


def _every_step(world: World, passes: int = 3) -> list[tuple[Step, Observed, Plan]]:
    """Every step of ``passes`` passes, none skipped, each pass's writes stored."""
    planned: list[tuple[Step, Observed, Plan]] = []
    for _ in range(passes):
        plan_pass(world, skip=False, planned=planned)
    return planned


@pytest.mark.parametrize("make", WORLDS.values(), ids=WORLDS.keys())
def test_a_step_skipped_by_configuration_plans_nothing(make: Callable[[], World]) -> None:
    for step, obs, plan in _every_step(make()):
        if not needed(step, obs.body, obs.options):
            assert plan == EMPTY, f"{step.__module__}.{step.__name__} was skipped"


def test_every_skippable_step_is_skipped_somewhere_and_plans_where_needed() -> None:
    """Not vacuous: each step of the table is skipped in some world and plans something in
    another (with a skip that covered it there, the test above would fail)."""
    skipped: set[Step] = set()
    planning: set[Step] = set()
    for make in WORLDS.values():
        for step, obs, plan in _every_step(make()):
            if not needed(step, obs.body, obs.options):
                skipped.add(step)
            elif plan != EMPTY:
                planning.add(step)
    assert skipped >= set(NEEDED)
    assert planning >= set(NEEDED)


def test_skipped_is_needed_for_every_step() -> None:
    """What the controller keeps per set object (``pipeline.skipped``) is ``needed``'s
    answer for each step of the table."""
    for make in WORLDS.values():
        world = make()
        body = world.lws
        assert skipped(body, world.options) == frozenset(
            step for step in NEEDED if not needed(step, body, world.options))
