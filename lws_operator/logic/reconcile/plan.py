"""A plan: the writes one step of a pass decided, as data, with what to do when each fails.

The logic layer never talks to the API server; a step of a pass (``logic.reconcile``) returns a
``Plan`` and the shell's executor (``kube.executor``) carries it out, in order. Every decision
about a failed write is part of the plan too, so the executor holds no policy of its own and the
reconciler holds no ``except``: a write that finds its object gone (404) or changed since it was
decided (409) is skipped, or ends the pass to be decided again, or fails it; any other error
records the failure Event the action names and then fails the pass, or is collected (its reason
goes into a status message through the next snapshot) and the plan goes on.

The vocabulary is the one docs/architecture.md ("The plan") names: server-side apply with our field
manager, create-if-absent, patches guarded by the resourceVersion in their body, deletes with a
UID precondition, Events. A second controller (DisaggregatedSet) plans with the same types and
runs on the same executor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeAlias, TypeVar, overload

from lws_operator.logic.objects.events import Event

CONFLICT_REQUEUE = 1.0  # seconds: decide again on the newer object a conflict revealed


class Then(Enum):
    """What a 404 or 409 answer means for the plan."""

    SKIP = "skip"  # nothing to do (gone, exists, or changed: its watch event brings a pass)
    REQUEUE = "requeue"  # go on, and look again after the action's ``requeue`` seconds
    STOP = "stop"  # end the pass now; look again after the action's ``requeue`` seconds
    FAIL = "fail"  # an error like any other (``Policy.collect`` then decides)
    COLLECT = "collect"  # go on, keeping ``Policy.reason_prefix`` + ``Policy.conflict_reason``


@dataclass(frozen=True)
class Policy:
    """How an action's failure is handled.

    ``failure``: an Event recorded when the write fails with an error the 404/409 rules leave
    to it; its note may hold ``{reason}`` (the API server's HTTP reason). ``collect``: instead of
    failing the pass, keep the reason (``reason_prefix`` + reason) for the next snapshot and go
    on with the plan."""

    not_found: Then = Then.FAIL
    conflict: Then = Then.FAIL
    requeue: float = CONFLICT_REQUEUE
    failure: Event | None = None
    collect: bool = False
    reason_prefix: str = ""
    conflict_reason: str = ""


CREATE_IF_ABSENT = Policy(conflict=Then.SKIP)  # 409 on create: it exists (a lagging cache)
GONE_OR_CHANGED_SKIP = Policy(not_found=Then.SKIP, conflict=Then.SKIP)
CONFLICT_STOPS = Policy(conflict=Then.STOP)


@dataclass(frozen=True)
class Target:
    """Where an object lives: its collection path (``/apis/apps/v1/namespaces/ns/statefulsets``)
    and the cache kind its answers are stored under (None: not cached)."""

    collection: str
    kind: str | None

    def item(self, name: str, subresource: str | None = None) -> str:
        return f"{self.collection}/{name}" + (f"/{subresource}" if subresource else "")


def apps(namespace: str, plural: str, kind: str | None) -> Target:
    return Target(f"/apis/apps/v1/namespaces/{namespace}/{plural}", kind)


def core(namespace: str, plural: str, kind: str | None) -> Target:
    return Target(f"/api/v1/namespaces/{namespace}/{plural}", kind)


def group(api: str, namespace: str, plural: str, kind: str | None) -> Target:
    """A namespaced resource of an API group (``api`` like ``scheduling.k8s.io/v1beta1``)."""
    return Target(f"/apis/{api}/namespaces/{namespace}/{plural}", kind)


def lws_target(namespace: str) -> Target:
    return group("leaderworkerset.x-k8s.io/v1", namespace, "leaderworkersets", "LeaderWorkerSet")


@dataclass(frozen=True)
class Common:
    """Fields every action has: Events recorded once it succeeds (``related`` to an object),
    its failure policy, a line for the log before it runs, the group it concerns (log
    context)."""

    events: tuple[Event, ...] = ()
    related: Mapping[str, Any] | None = None
    policy: Policy = Policy()
    log: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class Apply:
    """Server-side apply of ``body`` with our field manager, forcing ownership."""

    target: Target
    body: Mapping[str, Any]
    common: Common = Common()


@dataclass(frozen=True)
class Create:
    """Create ``body`` (POST); whether a 409 means "exists" is the policy's to say."""

    target: Target
    body: Mapping[str, Any]
    common: Common = Common()


@dataclass(frozen=True)
class Patch:
    """A merge (or strategic merge) patch of ``name``, optionally of a subresource; a body
    holding ``metadata.resourceVersion`` is guarded by it (409 when the object changed)."""

    target: Target
    name: str
    body: Mapping[str, Any]
    strategic: bool = False
    subresource: str | None = None
    common: Common = Common()


@dataclass(frozen=True)
class Update:
    """Replace ``name`` with ``body`` (PUT), guarded by the ``metadata.resourceVersion`` it
    holds. ``fallback``: the patch sent instead when the API server refuses the update as
    invalid (422). A ControllerRevision needs both: its ``data`` is immutable and compared byte
    for byte, and a patch re-encodes it (compact JSON), which only leaves the bytes of a revision
    a Go client created as they were; a PUT sends them as this client encoded them when it
    created the revision, which only leaves ours."""

    target: Target
    name: str
    body: Mapping[str, Any]
    fallback: Patch | None = None
    common: Common = Common()


@dataclass(frozen=True)
class Delete:
    """Delete ``name`` with a UID precondition. ``forget``: drop ``obj`` from the cache
    whatever the answer (objects no pass needs to see terminating); else the answer, when it
    is the object itself (a foreground deletion in progress), replaces the cached one."""

    target: Target
    name: str
    uid: str
    propagation: str | None = None
    forget: Mapping[str, Any] | None = None
    common: Common = Common()


@dataclass(frozen=True)
class Record:
    """Record an Event (best effort: recording never fails a pass)."""

    event: Event
    related: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Read:
    """An object a step needs that no cache holds (a Node, for exclusive placement): the
    runner GETs ``path`` and runs the step again with the answer in ``Observed.fetched``."""

    path: str


Action: TypeAlias = Apply | Create | Patch | Update | Delete | Record


@dataclass(frozen=True)
class Plan:
    """What a step decided: ``actions`` in order; ``stop`` ends the pass once they ran, and
    ``requeue_after`` is when to look again if the pass ends here (None: when an event wakes
    it). ``reads``: objects to fetch first; the step is asked again with them. ``carry``:
    what the controller takes of the plan besides its actions, handed to it before they run
    (``controllers.passes``): the LeaderWorkerSet's memory between passes
    (``logic.reconcile.snapshot.Remember``). What a later step of a pass needs of this one
    travels as the step's value (``Planned``), not here.

    ``overlap``: the pass need not wait for the answers: the runner starts the actions and goes
    on with the next steps, and waits for them before the pass ends (``controllers.passes``).
    Only for writes no later step of the pass reads back from the cache and whose failure may
    wait until the pass's end to fail it: a set's first revision, sent beside its leader
    StatefulSet (``logic.identity.revision_step``). Such a plan never ends the pass (no
    ``stop``, no ``Then.STOP`` policy)."""

    actions: tuple[Action, ...] = ()
    stop: bool = False
    requeue_after: float | None = None
    reads: tuple[Read, ...] = ()
    carry: object = None  # for the controller (the controller's own type)
    overlap: bool = False

    def __post_init__(self) -> None:
        if self.overlap and (self.stop or any(
                not isinstance(a, Record) and Then.STOP in (a.common.policy.not_found,
                                                            a.common.policy.conflict)
                for a in self.actions)):
            raise ValueError("a plan that may end the pass cannot overlap the steps after it")


EMPTY = Plan()

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Planned(Generic[T_co]):
    """A step's plan and what it decided for the steps after it: the runner carries ``plan``
    out and hands ``value`` back to the pass, which passes it on as an argument
    (``logic.leaderworkerset.pipeline.reconcile``)."""

    plan: Plan
    value: T_co


def earliest(*delays: float | None) -> float | None:
    """The soonest of several requeue delays (None: no requeue)."""
    return min((d for d in delays if d is not None), default=None)


S_co = TypeVar("S_co", covariant=True)
P = ParamSpec("P")


class Run(Protocol[S_co]):
    """What a pass function awaits for each of its steps (``controllers.passes`` runs it):
    ``run(step, *values)`` runs ``step(snapshot, *values)`` on a fresh snapshot, carries its plan
    out, and returns what the step decided (``Planned.value``; None for a step that returns a
    bare ``Plan``). Where the plan ends the pass, it does not return."""

    @overload
    def __call__(self, step: Callable[Concatenate[S_co, P], Planned[T]], /, *args: P.args,
                 **kwargs: P.kwargs) -> Awaitable[T]: ...

    @overload
    def __call__(self, step: Callable[Concatenate[S_co, P], Plan], /, *args: P.args,
                 **kwargs: P.kwargs) -> Awaitable[None]: ...
