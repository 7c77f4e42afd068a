"""When a LeaderWorkerSet's status is written: at once, or a little later with the counters of
that moment (one write per set per meaningful change, not one per watch event).

A pass computes the whole desired status (``logic.status`` and the conditions over it) and the
status step used to write it whenever it differed from the stored one. During a create or a
rollout the group counters (``replicas``, ``readyReplicas``, ``updatedReplicas``) move with every
group that starts, turns Ready or is replaced, so a set of five groups was written about ten times
on create and twenty on rollout, far more than upstream's controller, which sees only its
StatefulSets' status and so reconciles less often. Nothing waits on each of those steps:

* every condition (Available, Progressing, UpdateInProgress, RolloutStalled, ...), the
  ``observedGeneration`` and the ``hpaPodSelector`` are what ``kubectl wait``, GitOps health
  checks and the scale subresource's readers act on: a difference in any of them is written at
  once, together with the counters of that moment;
* a difference in the counters alone is deferred: the write happens once the counters have
  been still for ``QUIET`` seconds, and never later than ``LONGEST`` seconds after the first
  deferred change, however long the churn lasts (HPA reads ``status.replicas`` through the scale
  subresource every 15 s by default; a few seconds of lag is below what it can see). The write
  carries the counters of the moment it is made;
* except the first Ready group: ``readyReplicas`` leaving zero is written at once, since a set
  then starts to serve (a DisaggregatedSet creates a role's Services at that moment). Losing
  the last one is not urgent in the same way (Available already went False with the first
  group lost) and waits like any counter.

The deferral is the controller's memory (``logic.snapshot.Memory``), and losing it is harmless:
a new leader, or a restarted operator, computes the same desired status and either writes it or
starts a new deferral, so the stored status is never more than ``LONGEST`` seconds (plus a pass)
behind the counters. The status step asks to be looked at again when the deferral is due
(``Plan.requeue_after``), so the last change of a set that has gone quiet is written too. The
clock is an input, never read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

# The status fields whose change alone may wait.
COUNTERS: Final = ("replicas", "readyReplicas", "updatedReplicas")
QUIET: Final = 3.0  # seconds the counters must be still before a deferred write
LONGEST: Final = 6.0  # seconds after the first deferred change a write happens regardless
# A pass this close to the due time writes: the work queue's timer and the pass's clock are
# different clocks, and a pass a hair early must not schedule one more only to write then.
SLACK: Final = 0.05


@dataclass(frozen=True)
class Deferral:
    """A counters-only change not written yet: when the first one was seen (``since``), when
    the counters last moved (``moved``) and what they were then (``counters``)."""

    since: float
    moved: float
    counters: tuple[Any, ...]

    @property
    def due(self) -> float:
        return min(self.moved + QUIET, self.since + LONGEST)


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


def _serving_changed(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> bool:
    """Whether ``readyReplicas`` leaves zero (module docstring); absent counts as zero."""
    return bool(desired.get("readyReplicas")) and not observed.get("readyReplicas")


def pace(desired: Mapping[str, Any], observed: Mapping[str, Any], clock: float,
         deferral: Deferral | None) -> Pacing:
    """The decision for one pass (module docstring): ``desired`` is the status the pass
    computed, ``observed`` the stored one, ``deferral`` what the previous passes deferred."""
    if desired == observed:
        return NOTHING_TO_WRITE
    if not only_counters_differ(desired, observed) or _serving_changed(desired, observed):
        return WRITE_NOW
    counters = counters_of(desired)
    if deferral is None or deferral.since > clock:  # nothing pending, or the clock went back
        deferral = Deferral(clock, clock, counters)
    elif deferral.counters != counters:
        deferral = Deferral(deferral.since, clock, counters)
    wait = deferral.due - clock
    if wait <= SLACK:
        return WRITE_NOW
    return Pacing(False, deferral, wait)
