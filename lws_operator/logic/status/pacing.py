"""When a LeaderWorkerSet's status is written: at once, or a little later with the counters of
that moment (one write per set per meaningful change, not one per watch event).

A pass computes the whole desired status (``logic.status.set_status`` and the conditions over it)
and the status step used to write it whenever it differed from the stored one. During a create or a
rollout the group counters (``replicas``, ``readyReplicas``, ``updatedReplicas``) move with every
leader pod created, every group that starts, turns Ready or is replaced, so a set of five groups
was written about ten times on create and twenty on rollout, far more than upstream's
controller, which sees only its StatefulSets' status and so reconciles less often. Nothing waits
on each of those steps:

* every condition (Available, Progressing, UpdateInProgress, RolloutStalled, ...), the
  ``observedGeneration`` and the ``hpaPodSelector`` are what ``kubectl wait``, GitOps health
  checks and the scale subresource's readers act on: a difference in any of them is written at
  once, together with the counters of that moment. So is a pass's Event (a condition's
  change, in practice): it tells of the status of now, and rides on the write;
* a difference in the counters alone is deferred, and written with the counters of the moment
  the write is made. How long it may wait depends on whether a condition write is still to come:

  - while a create or a rollout is under way (``Progressing`` True, the set not Available),
    one is: Available when the last group turns Ready (or Progressing's fall on a stall or a
    passed deadline), and it carries the counters of then. Until then a quiet spell means
    nothing (under load, passes and readiness come in bursts with pauses of several seconds
    between them): the counters are written ``LONGEST`` seconds after the first deferred
    change, so at most once per ``LONGEST`` seconds per set, and never further behind.

    Why 30 s (the figures are in docs/performance.md, "Status pacing"). A rollout's counters
    move in bursts, one per group step (a leader going, coming back, its workers created,
    the group Ready: seconds apart), the steps tens of seconds apart, and both stretch as
    the control plane gets busier, so the larger the cluster, the longer a set's rollout. A
    bound shorter than a burst splits it into several writes, more of them the slower the
    rollout: with 10 s a set's status writes per rollout grew with the cluster's size,
    passed upstream's controller's (whose one worker coalesces more as it falls behind)
    and took the requests per pod up with them. 30 s covers a burst, so a slow rollout
    costs about one write per group step however long it takes, and ``kubectl get lws``
    still shows every step. A longer bound merges whole steps, but only while steps are
    shorter than it, and large clusters' rollouts are the slow ones: it would buy a few
    requests per set for counters twice as stale. No reader needs them sooner: HPA reads
    the scale subresource every 15 s and takes the current replicas from its spec, not
    from these counters; ``kubectl wait`` and health checks read the conditions, written at
    once; what is left is ``kubectl get lws`` (READY, UP-TO-DATE) and a DisaggregatedSet's
    summed counters. Holding them until the Available write (tried) left them a whole
    rollout behind;

    Many sets under way at once stretch the bound: they share a budget of ``BUDGET_RATE``
    counters-only writes a second, all together (``longest``: a set's bound is the number of
    sets under way over the rate, never under ``LONGEST`` nor over ``BUSIEST_LONGEST``). A
    rollout's length grows with the cluster, and with it the writes per set a fixed bound
    allows: at 5,000 pods (125 sets rolled out together, five minutes each) 30 s gave 8.8
    status writes per set against 6.0 for upstream's controller, whose one worker falls a
    minute behind and so coalesces whole steps. With the budget the writes of a big rollout
    are bounded by its duration, not by its number of sets times its duration, and a cluster
    of a few dozen sets keeps 30 s. The price is staler counters in ``kubectl get lws`` while
    more than ``LONGEST * BUDGET_RATE`` sets are under way at once: two minutes at most. The
    controller counts the sets under way from its cache (``Options.under_way``); the count
    is an input here, like the clock;
  - otherwise no condition write is due: the set is Available, and a counters change (a
    surge group reclaimed after the rollout, a scale-down) is the last of its kind for a
    while; or it says it is not progressing (``Progressing`` False or Unknown: stalled, past
    its deadline, paused, its pods not mutated), and a change of its counters is news. It is
    written once the counters have been still for ``QUIET`` seconds, and ``SETTLED_LONGEST``
    seconds after the first deferred change at the latest.

* ``readyReplicas`` leaving zero is written at once only when a controller acts on it: a
  DisaggregatedSet creates a role's Services once every role has a Ready group. Its rollout's
  other gate, a new child with all its groups Ready, is that child's Available write. Anything
  else that serves reads the pods' readiness, not this counter, which waits like the others.

The deferral is the controller's memory (``logic.reconcile.snapshot.Memory``, which holds the
``Deferral`` data), and losing it is harmless: a new leader, or a restarted operator, computes
the same desired status and either writes it or starts a new deferral, so the stored status is
never more than ``LONGEST`` seconds (plus a pass) behind the counters that leader sees. The
status step asks to be looked at again when the deferral is due (``Plan.requeue_after``), so
the last change of a set that has gone quiet is written too. The clock is an input, never read
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from lws_operator.api.constants import CONDITION_AVAILABLE, CONDITION_PROGRESSING
from lws_operator.logic.reconcile.snapshot import Deferral

# The status fields whose change alone may wait.
COUNTERS: Final = ("replicas", "readyReplicas", "updatedReplicas")
# A set being created or rolled out: seconds after the first deferred change the write happens,
# whatever the counters do meanwhile (module docstring). The longest any counters change waits.
LONGEST: Final = 30.0
# Counters-only writes a second that the sets under way share, and the longest their bound
# stretches to when many are (module docstring): with one a second, 30 s holds up to 30 sets
# under way at once, and 120 sets or more wait two minutes.
BUDGET_RATE: Final = 1.0
BUSIEST_LONGEST: Final = 120.0
# Any other set: seconds its counters must be still before a deferred write, and seconds after
# the first deferred change the write happens at the latest.
QUIET: Final = 3.0
SETTLED_LONGEST: Final = 10.0
# A pass this close to the due time writes: the work queue's timer and the pass's clock are
# different clocks, and a pass a hair early must not schedule one more only to write then.
SLACK: Final = 0.05


def longest(under_way: int) -> float:
    """How long after its first deferred change a set under way writes its counters, while
    ``under_way`` sets of the controller are (module docstring): they share ``BUDGET_RATE``
    writes a second, within ``LONGEST`` and ``BUSIEST_LONGEST``."""
    return min(BUSIEST_LONGEST, max(LONGEST, under_way / BUDGET_RATE))


def due(deferral: Deferral, in_progress: bool, under_way: int = 0) -> float:
    """When to write ``deferral``: ``longest(under_way)`` after the first change while a
    create or a rollout is ``in_progress``; otherwise ``QUIET`` after the last and
    ``SETTLED_LONGEST`` after the first at the latest (module docstring)."""
    if in_progress:
        return deferral.since + longest(under_way)
    return min(deferral.moved + QUIET, deferral.since + SETTLED_LONGEST)


@dataclass(frozen=True)
class Pacing:
    """Whether to write the desired status now, the deferral to remember instead (None:
    nothing pending), and in how many seconds to look again for it."""

    write: bool
    deferral: Deferral | None = None
    recheck_after: float | None = None


NOTHING_TO_WRITE: Final = Pacing(False)
WRITE_NOW: Final = Pacing(True)


def counters_of(status: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(status.get(k) for k in COUNTERS)


def only_counters_differ(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> bool:
    """Whether ``desired`` and ``observed`` differ, and only in ``COUNTERS``."""
    if counters_of(desired) == counters_of(observed):
        return False
    keys = (desired.keys() | observed.keys()).difference(COUNTERS)
    return all(desired.get(k) == observed.get(k) for k in keys)


def _true(status: Mapping[str, Any], condition_type: str) -> bool:
    return any(c.get("type") == condition_type and c.get("status") == "True"
               for c in status.get("conditions") or () if isinstance(c, Mapping))


def in_progress(status: Mapping[str, Any]) -> bool:
    """Whether ``status`` tells of a create or a rollout under way, whose Available (or
    Progressing's fall) is still to be written: ``Progressing`` True, ``Available`` not."""
    return _true(status, CONDITION_PROGRESSING) and not _true(status, CONDITION_AVAILABLE)


def _serving_started(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> bool:
    """Whether ``readyReplicas`` leaves zero (module docstring); absent counts as zero."""
    return bool(desired.get("readyReplicas")) and not observed.get("readyReplicas")


def pace(desired: Mapping[str, Any], observed: Mapping[str, Any], clock: float,
         deferral: Deferral | None, *, events: bool = False,
         serving_read: bool = False, under_way: int = 0) -> Pacing:
    """The decision for one pass (module docstring): ``desired`` is the status the pass
    computed, ``observed`` the stored one, ``deferral`` what the previous passes deferred;
    ``events``: the pass has Events to record with the write; ``serving_read``: a controller
    acts on the first Ready group (the set belongs to a DisaggregatedSet); ``under_way``: how
    many of the controller's sets are being created or rolled out (``longest``)."""
    if desired == observed:
        return NOTHING_TO_WRITE
    if events or not only_counters_differ(desired, observed):
        return WRITE_NOW
    if serving_read and _serving_started(desired, observed):
        return WRITE_NOW
    counters = counters_of(desired)
    if deferral is None or deferral.since > clock:  # nothing pending, or the clock went back
        deferral = Deferral(clock, clock, counters)
    elif deferral.counters != counters:
        deferral = Deferral(deferral.since, clock, counters)
    wait = due(deferral, in_progress(desired), under_way) - clock
    if wait <= SLACK:
        return WRITE_NOW
    return Pacing(False, deferral, wait)
