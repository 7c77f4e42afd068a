"""The steps a pass skips by a set's configuration (the ``if``s of
``logic.leaderworkerset.pipeline.reconcile``) would have planned nothing: passes over sets of each
configuration are run with those steps run anyway (Parallel termination, the ``none`` provider's
hooks, the recreation of unmutated pods), and each step the configuration would have skipped must
return an empty plan. Each also plans something where it is not skipped, so a skip that covered
too much would fail here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lws_operator.logic.failures import termination_step as termination
from lws_operator.logic.failures.termination import parallel
from lws_operator.logic.hash_mode import hash_groups_step as hash_groups
from lws_operator.logic.leaderworkerset.pipeline import Configuration, configuration
from lws_operator.logic.mutation import recreate_step as recreate
from lws_operator.logic.providers import none
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


Ran = tuple[Callable[..., Any], Observed, Plan]


def _every_step(world: World, passes: int = 3) -> list[Ran]:
    """Every step of ``passes`` passes, none skipped, each pass's writes stored."""
    planned: list[Ran] = []
    for _ in range(passes):
        plan_pass(world, skip=False, planned=planned)
    return planned


def _skipped(step: Callable[..., Any], obs: Observed) -> str | None:
    """Why the pass would not have run ``step`` over ``obs`` (None: it would have)."""
    config = configuration(obs.body, obs.options)
    if step is termination.step and not config.parallel:
        return "Sequential"
    if getattr(step, "__self__", None) is none.PROVIDER and config.provider is None:
        return "no provider"
    if step is recreate.step and not obs.unmutated_pods and obs.memory.recreation is None:
        return "nothing to recreate"
    return None


@pytest.mark.parametrize("make", WORLDS.values(), ids=WORLDS.keys())
def test_a_step_skipped_by_configuration_plans_nothing(make: Callable[[], World]) -> None:
    for step, obs, plan in _every_step(make()):
        why = _skipped(step, obs)
        if why is not None:
            assert plan == EMPTY, f"{step.__qualname__} was skipped ({why})"


@pytest.mark.parametrize("make", WORLDS.values(), ids=WORLDS.keys())
def test_the_pass_skips_them(make: Callable[[], World]) -> None:
    """The pass itself takes each skip: no step it runs is one the configuration skips."""
    world = make()
    for _ in range(3):
        ran: list[Ran] = []
        plan_pass(world, planned=ran)
        assert [step.__qualname__ for step, obs, _plan in ran if _skipped(step, obs)] == []


def test_every_skip_is_taken_somewhere_and_its_step_plans_where_not() -> None:
    """Not vacuous: each skip is taken in some world, and its step plans something in another
    (with a skip that covered it there, the test above would fail)."""
    skipped: set[str] = set()
    planning: set[str] = set()
    for make in WORLDS.values():
        world = make()
        hashed = configuration(world.lws, world.options).hashed
        for step, obs, plan in _every_step(world):
            why = _skipped(step, obs)
            name = "provider" if getattr(step, "__self__", None) is not None and type(
                step.__self__).__module__.startswith(  # type: ignore[attr-defined]
                    "lws_operator.logic.providers") else step.__qualname__
            if why is not None:
                skipped.add(name)
            elif plan != EMPTY:
                planning.add(name)
            if hashed and step is hash_groups.readiness and plan != EMPTY:
                planning.add("readiness")
    skippable = {termination.step.__qualname__, "provider", recreate.step.__qualname__}
    assert skipped >= skippable
    assert planning >= skippable | {"readiness"}


def test_hash_readiness_plans_nothing_for_ordinal_sets() -> None:
    """The Hash-only steps: ``admit`` needs the admission only a Hash set's ``prepare`` makes;
    ``readiness`` plans nothing for an Ordinal set."""
    for make in WORLDS.values():
        world = make()
        if configuration(world.lws, world.options).hashed:
            continue
        for _ in range(2):
            assert hash_groups.readiness(world.observe({})) == EMPTY
            plan_pass(world)


def test_configuration_reads_the_spec_and_options() -> None:
    world = at_rest(built_world(manifest(podTerminationPolicy="Parallel")))
    assert configuration(world.lws, world.options) == Configuration(False, True, None)
    assert parallel(world.lws)
    gang = new_world(manifest(size=2, scheduling=GANG))
    assert configuration(gang.lws, Options(600.0)).provider is not None
    hashed = new_world(manifest(size=2, groupIdentity="Hash"))
    assert configuration(hashed.lws, Options(600.0)).hashed
