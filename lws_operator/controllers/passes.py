"""The runner every controller's pass shares: for each step the pass asks for, build the
snapshot, plan, execute.

A pass is one function that reads top to bottom (``logic.leaderworkerset.pipeline.reconcile``): it
awaits ``run(step, *values)`` for each step in order, and gets back what the step decided for
the steps after it (``logic.reconcile.plan.Planned``), which it hands on to them as arguments; a
step it skips is an ``if`` in that function. For each step the runner asks the controller for a
fresh snapshot from the watch caches, so the step sees the answers of the writes the steps
before it made (the executor stores them); it reads what the step asked for
(``logic.reconcile.plan.Read``) and asks it again; it carries the plan out; and where a plan ends
the pass it does not return to the pass function at all. The LeaderWorkerSet and DisaggregatedSet
controllers both run their passes here; what differs is the snapshot, the pass and two hooks
(``adopt``, ``settle``: what the controller keeps of a plan beyond the pass).

A set deleted while its pass is in flight answers the pass's next write to the set itself (its
status, its annotations) with 404. That is not a failure: the runner ends the pass as if the
set were gone (a debug line, no retry), and the pass the deletion queued cleans up after it. A
404 for anything else (a StatefulSet, a pod) is the plan's policy's to judge, as before.

A plan may overlap the steps after it (``Plan.overlap``): the runner starts its writes and goes
on, and the pass ends only once they are answered (``_Steps.join``), their failures failing it
then. A set's first pass sends its revision this way, so its leader StatefulSet (the first pod's
path) does not wait for the revision's round trip, nor for the other passes the event loop runs
meanwhile.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from lws_operator.kube.client import ApiException
from lws_operator.kube.executor import Executor, Outcome
from lws_operator.logic.reconcile.plan import Plan, Planned, Run, earliest

S = TypeVar("S")
R = TypeVar("R")
S_co = TypeVar("S_co", covariant=True)

log = logging.getLogger(__name__)


class Observe(Protocol[S_co]):
    """Builds a step's snapshot: the failure reasons the previous step's plan collected, the
    objects fetched for it. None: the owner is gone (end the pass)."""

    def __call__(self, collected: tuple[str, ...],
                 fetched: Mapping[str, dict[str, Any]]) -> S_co | None: ...


@dataclass(frozen=True)
class Ran(Generic[R]):
    """How a pass ended: ``requeue_after`` of the last plan carried out, the ``soonest`` requeue
    any plan asked for (both controllers' result: a pass that ends early keeps what an
    earlier step asked for), whether the owner was
    ``gone`` or a plan ``stopped`` the pass, what the pass function returned (``result``; None
    when it did not get to the end), and every failure reason the plans collected
    (``logic.reconcile.plan.Policy.collect``), in order."""

    requeue_after: float | None
    soonest: float | None
    gone: bool
    stopped: bool
    result: R | None
    collected: tuple[str, ...]


def _nothing(_plan: Plan) -> None:
    return None


def _unchanged(_plan: Plan, _outcome: Outcome) -> None:
    return None


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


class PassEnds(Exception):
    """Raised by a pass's ``run`` where the pass ends before its function returns: the owner
    is gone, or a plan stopped it. The pass function lets it through."""

    def __init__(self, gone: bool) -> None:
        super().__init__()
        self.gone = gone


class _Steps(Generic[S]):
    """The ``run`` of one pass in flight (``Run``), with what the pass has done so far."""

    def __init__(self, executor: Executor, observe: Observe[S],
                 regarding: Callable[[S], Mapping[str, Any]], adopt: Callable[[Plan], None],
                 settle: Callable[[Plan, Outcome], None], owner: tuple[str, str] | None) -> None:
        self.executor = executor
        self.observe = observe
        self.regarding = regarding
        self.adopt = adopt
        self.settle = settle
        self.owner = owner
        self.collected: tuple[str, ...] = ()  # what the last plan carried out collected
        self.every: list[str] = []
        self.requeue: float | None = None  # the last plan's
        self.soonest: float | None = None
        # Plans whose answers the pass does not wait for (``Plan.overlap``), joined at its end.
        self.overlapping: list[tuple[Plan, asyncio.Future[Outcome]]] = []

    async def __call__(self, step: Callable[..., Plan | Planned[Any]], /, *args: Any,
                       **kwargs: Any) -> Any:
        obs = self.observe(self.collected, {})
        if obs is None:
            raise PassEnds(gone=True)
        planned = step(obs, *args, **kwargs)
        plan = planned.plan if isinstance(planned, Planned) else planned
        if plan.reads:
            planned = await self._read(step, args, kwargs, plan)
            plan = planned.plan if isinstance(planned, Planned) else planned
        self.adopt(plan)
        if plan.overlap:
            self.overlapping.append(
                (plan, asyncio.ensure_future(self._execute(plan, self.regarding(obs)))))
            return planned.value if isinstance(planned, Planned) else None
        outcome = await self._execute(plan, self.regarding(obs))
        self.settle(plan, outcome)
        self.collected, self.requeue = tuple(outcome.collected), outcome.requeue_after
        if self.collected:
            self.every.extend(self.collected)
        if self.requeue is not None:  # most plans ask for none
            self.soonest = earliest(self.soonest, self.requeue)
        if outcome.stop:
            raise PassEnds(gone=False)
        return planned.value if isinstance(planned, Planned) else None

    async def _execute(self, plan: Plan, regarding: Mapping[str, Any]) -> Outcome:
        try:
            return await self.executor.execute(plan, regarding)
        except ApiException as exc:
            if self.owner is None or not owner_not_found(exc, self.owner):
                raise
            log.debug("%s %s was deleted during its pass; the pass ends", *self.owner)
            self.requeue = None
            raise PassEnds(gone=True) from None

    async def join(self) -> None:
        """Waits for the plans that overlapped the steps after them (``Plan.overlap``) and takes
        their outcomes: what they collected and the requeue they asked for count as every
        other plan's (the last plan's ``requeue`` stays the last one carried out in order); the
        first failure among them is raised, as it would have been in its step."""
        for plan, result in await self._answers():
            if isinstance(result, BaseException):
                raise result
            self.settle(plan, result)
            self.every.extend(result.collected)
            if result.requeue_after is not None:
                self.soonest = earliest(self.soonest, result.requeue_after)

    async def drain(self) -> None:
        """Waits for the overlapping plans of a pass that failed: they end before the pass
        does, and their own failures are logged, the pass's error being the one raised."""
        for _, result in await self._answers():
            if isinstance(result, BaseException) and not isinstance(result, PassEnds):
                log.warning("a write of a failed pass failed too: %r", result)

    async def _answers(self) -> list[tuple[Plan, Outcome | BaseException]]:
        """Each overlapping plan with its outcome or its failure, once all are answered; the
        list of overlapping plans is empty after."""
        pending, self.overlapping = self.overlapping, []
        if not pending:
            return []
        results = await asyncio.gather(*(task for _, task in pending), return_exceptions=True)
        return [(plan, result) for (plan, _), result in zip(pending, results, strict=True)]

    async def _read(self, step: Callable[..., Plan | Planned[Any]], args: tuple[Any, ...],
                    kwargs: dict[str, Any], plan: Plan) -> Plan | Planned[Any]:
        """The step's plan, after reading what it asked for (``logic.reconcile.plan.Read``).

        The step is asked again on a fresh snapshot with everything read so far, and the
        caches may have moved on meanwhile (a leader scheduled while its group's Node was
        read asks for one more Node), so reading repeats, a few rounds at most; a step still
        asking after them ends the pass, to be looked at again shortly."""
        fetched: dict[str, dict[str, Any]] = {}
        planned: Plan | Planned[Any] = plan
        for _ in range(READ_ROUNDS):
            if not plan.reads:
                return planned
            fetched.update(await self.executor.read(plan.reads))
            again = self.observe(self.collected, fetched)
            if again is None:
                return Plan(stop=True)  # gone while reading: the next pass cleans up
            planned = step(again, *args, **kwargs)
            plan = planned.plan if isinstance(planned, Planned) else planned
        return planned if not plan.reads else Plan(stop=True, requeue_after=READ_REQUEUE)


class PassRunner:
    """Runs passes against the executor."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    async def run(self, pass_: Callable[[Run[S]], Awaitable[R]], observe: Observe[S],
                  regarding: Callable[[S], Mapping[str, Any]], *,
                  adopt: Callable[[Plan], None] = _nothing,
                  settle: Callable[[Plan, Outcome], None] = _unchanged,
                  owner: tuple[str, str] | None = None) -> Ran[R]:
        """The pass function ``pass_``, its steps run as the module docstring says.
        ``adopt`` sees each plan before it is carried out, ``settle`` after, with its outcome
        (what the controller keeps of it beyond the pass). Events are recorded regarding
        ``regarding(snapshot)``. ``owner`` (resource, name): a 404 for it ends the pass as
        gone (module docstring)."""
        steps = _Steps(self.executor, observe, regarding, adopt, settle, owner)
        result: R | None = None
        ended: PassEnds | None = None
        try:
            # ``_Steps.__call__`` is both overloads of ``Run.__call__`` in one.
            result = await pass_(steps)  # type: ignore[arg-type]
        except PassEnds as end:
            ended = end
        except BaseException:
            await steps.drain()
            raise
        try:
            await steps.join()  # a pass ends once every write it started is answered
        except PassEnds as end:  # the owner was gone for an overlapping write
            ended, result = ended or end, None
        if ended is not None:
            return Ran(steps.requeue, steps.soonest, ended.gone, not ended.gone, None,
                       tuple(steps.every))
        return Ran(steps.requeue, steps.soonest, False, False, result, tuple(steps.every))


def plan_through(pass_: Coroutine[Any, Any, R]) -> R | None:
    """Runs the pass coroutine ``pass_`` whose ``run`` never waits (plans computed, not carried
    out: the benchmark, the table tests) to its end: what it returned, or None when its ``run``
    ended it by raising ``PassEnds``."""
    try:
        pass_.send(None)
    except StopIteration as done:
        result: R = done.value
        return result
    except PassEnds:
        return None
    pass_.close()
    raise RuntimeError("a pass run by plan_through waited")
