"""The group disruption budget's decision: may this pod be evicted now? (ours; the README's
"Group disruption budget").

A PodDisruptionBudget counts pods, but a LeaderWorkerSet serves by groups: evicting one worker
takes its whole group out of service (the default restart policy recreates the group), so a
drain that evicts one pod of each of four groups takes four groups down even under a PDB. The
budget here counts groups. A group is *disrupted* when it is not whole and Ready: a pod of it
is missing, not Ready, or being deleted, or an eviction of one of its pods was allowed a moment
ago and the watch cache does not show it yet (a reservation, ``logic.disruption.reservations``).

The rule, for an eviction of a pod of group ``g`` of a set with budget ``b``:

* ``g`` already disrupted: allowed. Its group is out of service already; another of its pods
  going costs nothing more.
* otherwise allowed only while fewer than ``b`` other groups are disrupted (so that, once it
  goes, at most ``b`` are); refused with "too many requests" else, the answer a
  PodDisruptionBudget gives, which ``kubectl drain`` waits on and retries.

Ordinal groups are the indices ``0 .. spec.replicas-1``; pods of higher indices (a scale-down
in progress) belong to no counted group and are never refused. Hash groups are the group
indices (key prefixes) their pods carry, and groups missing to make ``spec.replicas`` count as
disrupted. Everything here is a function of
plain data: the admission shell (``admission.eviction``) reads the cache and keeps the
reservations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.view import deleting, group_index
from lws_operator.logic.status.readiness import pod_ready

# Seconds an allowed eviction's group counts as disrupted before the watch cache shows it so.
# The API server deletes the pod right after our answer (its deletion reaches the cache within
# a watch event); an eviction that something after us refuses (a PodDisruptionBudget) leaves a
# reservation that simply expires. Shorter than ``kubectl drain``'s 5 s retry would let a
# slow cache admit two groups; much longer only delays drains after such a refusal.
RESERVATION_SECONDS = 10.0


@dataclass(frozen=True)
class Decision:
    """The answer to one eviction."""

    allowed: bool
    group: str | None  # the evicted pod's group (None: in no counted group)
    budget: int
    disrupted: tuple[str, ...]  # the groups disrupted before this eviction, sorted by index
    message: str = ""

    @property
    def reserve(self) -> bool:
        """Whether the group must be held as disrupted until the cache shows it."""
        return self.allowed and self.group is not None and self.group not in self.disrupted


def _index_order(group: str) -> tuple[int, str]:
    return (int(group), group) if group.isdigit() else (1 << 62, group)


def disrupted_groups(pods: Iterable[Mapping[str, Any]], replicas: int, size: int,
                     hashed: bool = False) -> set[str]:
    """The groups that are not whole and Ready: fewer than ``size`` live pods, or any pod not
    Ready or being deleted. Ordinal groups are the indices ``0 .. replicas-1``. Hash groups have
    no fixed indices (a key prefix each): every group seen counts, and groups missing to make
    ``replicas`` count as disrupted too, under names no group has (``missing-<n>``)."""
    live: dict[str, int] = {}
    bad: set[str] = set()
    wanted = None if hashed else {str(i) for i in range(replicas)}
    seen: set[str] = set()
    for pod in pods:
        group = group_index(pod)
        if group is None or (wanted is not None and group not in wanted):
            continue
        seen.add(group)
        if deleting(pod) or not pod_ready(pod):
            bad.add(group)
        else:
            live[group] = live.get(group, 0) + 1
    if wanted is not None:
        return bad | {g for g in wanted if live.get(g, 0) < size}
    out = bad | {g for g in seen if live.get(g, 0) < size}
    return out | {f"missing-{n}" for n in range(max(0, replicas - len(seen)))}


def decide(*, group: str | None, budget: int, disrupted: set[str], set_name: str) -> Decision:
    """The budget's answer for an eviction of a pod of ``group`` (see the module docstring)."""
    ordered = tuple(sorted(disrupted, key=_index_order))
    if group is None or group in disrupted:
        return Decision(True, group, budget, ordered)
    others = len(disrupted)
    if others < budget:
        return Decision(True, group, budget, ordered)
    return Decision(False, group, budget, ordered, refusal_message(
        set_name, group, budget, ordered))


def refusal_message(set_name: str, group: str, budget: int, disrupted: tuple[str, ...]) -> str:
    """Worded like the API server's PodDisruptionBudget refusal, naming groups."""
    shown = ", ".join(disrupted[:10]) + (", ..." if len(disrupted) > 10 else "")
    groups = "group" if budget == 1 else "groups"
    return (f"Cannot evict pod as it would violate the group disruption budget of "
            f"LeaderWorkerSet {set_name}: group {group} is healthy and {len(disrupted)} "
            f"group(s) [{shown}] are already disrupted; at most {budget} {groups} may be "
            f"disrupted at once.")
