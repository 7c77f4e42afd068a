"""The runner loop every controller's pass shares: build the snapshot, plan, execute, repeat.

A pass is an ordered list of pure steps, each ``(snapshot) -> Plan`` (docs/architecture.md "The
plan"). Before each step the runner asks the controller for a fresh snapshot from the watch
caches, so a step sees the answers of the writes the steps before it made (the executor stores
them); it reads what a step asked for (``logic.reconcile.plan.Read``) and asks the step again; it
carries the plan out; and it ends the pass where a plan says so. What a later step needs of an
earlier step's decision travels in the controller's own ``decided`` value, taken from a plan's
``carry``. The LeaderWorkerSet and DisaggregatedSet controllers both run their passes here; what
differs is the snapshot, the steps and two hooks (``adopt``, ``settle``).

A set deleted while its pass is in flight answers the pass's next write to the set itself (its
status, its annotations) with 404. That is not a failure: the runner ends the pass as if the
set were gone (a debug line, no retry), and the pass the deletion queued cleans up after it. A
404 for anything else (a StatefulSet, a pod) is the plan's policy's to judge, as before.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from lws_operator.kube.client import ApiException
from lws_operator.kube.executor import Executor, Outcome
from lws_operator.logic.reconcile.plan import Plan, earliest

S = TypeVar("S")
D = TypeVar("D")
S_contra = TypeVar("S_contra", contravariant=True)
D_contra = TypeVar("D_contra", contravariant=True)
S_co = TypeVar("S_co", covariant=True)

log = logging.getLogger(__name__)


class Observe(Protocol[D_contra, S_co]):
    """Builds a step's snapshot: what earlier steps decided, the failure reasons the previous
    step's plan collected, the objects fetched for it. None: the owner is gone (end the pass)."""

    def __call__(self, decided: D_contra, collected: tuple[str, ...],
                 fetched: Mapping[str, dict[str, Any]]) -> S_co | None: ...


@dataclass(frozen=True)
class Ran(Generic[D]):
    """How a pass ended: ``requeue_after`` of the last plan carried out (the LeaderWorkerSet
    controller's result), the ``soonest`` requeue any plan asked for, whether the owner was
    ``gone`` or a plan ``stopped`` the pass, what was decided last, and every failure reason
    the plans collected (``logic.reconcile.plan.Policy.collect``), in order."""

    requeue_after: float | None
    soonest: float | None
    gone: bool
    stopped: bool
    decided: D
    collected: tuple[str, ...]


def _keep(decided: D, _plan: Plan) -> D:
    return decided


def _unchanged(decided: D, _outcome: Outcome) -> D:
    return decided


READ_ROUNDS = 3  # rounds of reads a step may ask for in one pass (``PassRunner._plan``)
READ_REQUEUE = 1.0  # seconds: when a step still asks after them, look again then


_stamped: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """The time in RFC 3339 at second precision, as conditions carry it: formatted once per
    second, since every step of every pass asks for it."""
    global _stamped
    second = int(time.time())
    if _stamped[0] != second:
        _stamped = (second, dt.datetime.fromtimestamp(second, dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"))
    return _stamped[1]


def owner_not_found(exc: BaseException, owner: tuple[str, str]) -> bool:
    """Whether ``exc`` is the API server's 404 for the owner itself, ``owner`` being its
    resource (plural, ``leaderworkersets``) and name, as the Status's ``details`` name them."""
    if not isinstance(exc, ApiException) or exc.status != 404:
        return False
    try:
        details = json.loads(exc.body or "").get("details") or {}
    except (ValueError, AttributeError):
        return False
    return (details.get("kind"), details.get("name")) == owner


class PassRunner:
    """Runs the steps of one pass against the executor."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    async def run(self, steps: Iterable[Callable[[S], Plan]], observe: Observe[D, S],
                  decided: D, regarding: Callable[[S], Mapping[str, Any]], *,
                  adopt: Callable[[D, Plan], D] = _keep,
                  settle: Callable[[D, Outcome], D] = _unchanged,
                  owner: tuple[str, str] | None = None,
                  needed: Callable[[Callable[[S], Plan]], bool] | None = None) -> Ran[D]:
        """Each step in order. ``adopt`` takes a plan's decision into ``decided`` before the
        plan is carried out; ``settle`` updates it from the outcome afterwards. Events are
        recorded regarding ``regarding(snapshot)``. ``owner`` (resource, name): a 404 for it
        ends the pass as gone (module docstring). ``needed``: False for a step that can only
        plan nothing now (the controller knows it from the owner's spec, without a
        snapshot); it is skipped as if its plan were empty."""
        collected: tuple[str, ...] = ()
        every: list[str] = []
        requeue: float | None = None
        soonest: float | None = None
        for step in steps:
            if needed is not None and not needed(step):
                collected, requeue = (), None  # what an empty plan's outcome leaves
                continue
            obs = observe(decided, collected, {})
            if obs is None:
                return Ran(requeue, soonest, True, False, decided, tuple(every))
            plan = await self._plan(step, obs, observe, decided, collected)
            decided = adopt(decided, plan)
            try:
                outcome = await self.executor.execute(plan, regarding(obs))
            except ApiException as exc:
                if owner is None or not owner_not_found(exc, owner):
                    raise
                log.debug("%s %s was deleted during its pass; the pass ends", *owner)
                return Ran(None, soonest, True, False, decided, tuple(every))
            decided = settle(decided, outcome)
            collected, requeue = tuple(outcome.collected), outcome.requeue_after
            if collected:
                every.extend(collected)
            if requeue is not None:  # most plans ask for none
                soonest = earliest(soonest, requeue)
            if outcome.stop:
                return Ran(requeue, soonest, False, True, decided, tuple(every))
        return Ran(requeue, soonest, False, False, decided, tuple(every))

    async def _plan(self, step: Callable[[S], Plan], obs: S, observe: Observe[D, S],
                    decided: D, collected: tuple[str, ...]) -> Plan:
        """The step's plan, after reading what it asked for (``logic.reconcile.plan.Read``).

        The step is asked again on a fresh snapshot with everything read so far, and the
        caches may have moved on meanwhile (a leader scheduled while its group's Node was
        read asks for one more Node), so reading repeats, a few rounds at most; a step still
        asking after them ends the pass, to be looked at again shortly."""
        plan = step(obs)
        if not plan.reads:
            return plan  # most steps: nothing to read
        fetched: dict[str, dict[str, Any]] = {}
        for _ in range(READ_ROUNDS):
            if not plan.reads:
                return plan
            fetched.update(await self.executor.read(plan.reads))
            again = observe(decided, collected, fetched)
            if again is None:
                return Plan(stop=True)  # gone while reading: the next pass cleans up
            plan = step(again)
        return plan if not plan.reads else Plan(stop=True, requeue_after=READ_REQUEUE)
