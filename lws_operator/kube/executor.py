"""Carries out a ``logic.reconcile.plan.Plan``: one request per action, in order, and every
error policy.

This is the only place where a controller's write can fail: the policy each action carries
(``logic.reconcile.plan.Policy``) says what a 404, a 409 or another error means, so the reconciler
itself has no ``except``. Every answer is stored in the watch cache at once (``ClusterCache.upsert``
keeps a newer watch event over an older answer), so the next step of the pass, and the next
pass, see the write even before its watch event arrives, and do not redo it. Events are
handed to the ``EventRecorder``, which queues them and returns (best effort, written in the
background): a pass never waits for an Event write.

Generic over controllers: nothing here knows a LeaderWorkerSet. Events are recorded regarding
the object the plan is executed for.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lws_operator.api.constants import FIELD_MANAGER
from lws_operator.kube.cache import ClusterCache
from lws_operator.kube.client import (
    APPLY_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiException,
    KubeClient,
)
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.logcontext import bind_group
from lws_operator.logic.objects.events import Event
from lws_operator.logic.reconcile.plan import (
    Action,
    Apply,
    Create,
    Delete,
    Patch,
    Plan,
    Policy,
    Read,
    Record,
    Then,
    Update,
    earliest,
)

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What carrying out a plan came to: whether the pass ends here, when to look again, the
    reasons of the failures the plan chose to collect (``Policy.collect``), and whether an
    action's policy cut the plan short (``interrupted``: its later actions did not run)."""

    stop: bool = False
    requeue_after: float | None = None
    collected: list[str] = field(default_factory=list)
    interrupted: bool = False


class _Stop(Exception):
    def __init__(self, requeue: float) -> None:
        self.requeue = requeue


class Executor:
    """Runs plans against the API server, storing the answers in the cache."""

    def __init__(self, kube: KubeClient, cache: ClusterCache, events: EventRecorder) -> None:
        self.kube = kube
        self.cache = cache
        self.events = events

    async def read(self, reads: tuple[Read, ...]) -> dict[str, dict[str, Any]]:
        """GET each object a step asked for (errors fail the pass, as a failed read of the
        cluster leaves nothing to decide on)."""
        return {r.path: await self.kube.request("GET", r.path) for r in reads}

    async def execute(self, plan: Plan, regarding: Mapping[str, Any]) -> Outcome:
        """Every action of ``plan`` in order, Events regarding ``regarding``."""
        outcome = Outcome(stop=plan.stop, requeue_after=plan.requeue_after)
        if not plan.actions:
            return outcome  # most steps of most passes: nothing to do, no group bound
        try:
            for action in plan.actions:
                await self._one(action, regarding, outcome)
        except _Stop as stop:
            return Outcome(stop=True, requeue_after=stop.requeue, collected=outcome.collected,
                           interrupted=True)
        finally:
            bind_group(None)
        return outcome

    async def _one(self, action: Action, regarding: Mapping[str, Any],
                   outcome: Outcome) -> None:
        if isinstance(action, Record):
            self.events.record(regarding, action.event, related=action.related)
            return
        common = action.common
        if common.group is not None:
            bind_group(common.group)
        if common.log:
            log.info("%s", common.log)
        try:
            answer = await self._send(action)
        except ApiException as exc:
            if isinstance(action, Update) and action.fallback is not None and exc.status == 422:
                await self._one(action.fallback, regarding, outcome)
                return
            await self._failed(action, exc, regarding, outcome)
            return
        self._store(action, answer)
        for event in common.events:
            self.events.record(regarding, event, related=common.related)

    async def _send(self, action: Apply | Create | Patch | Update | Delete) -> dict[str, Any]:
        target = action.target
        if isinstance(action, Apply):
            name = str((action.body.get("metadata") or {}).get("name"))
            return await self.kube.request(
                "PATCH", target.item(name), body=action.body,
                query={"fieldManager": FIELD_MANAGER, "force": "true"},
                content_type=APPLY_PATCH)
        if isinstance(action, Create):
            return await self.kube.request("POST", target.collection, body=action.body)
        if isinstance(action, Patch):
            return await self.kube.request(
                "PATCH", target.item(action.name, action.subresource), body=action.body,
                content_type=STRATEGIC_MERGE_PATCH if action.strategic else MERGE_PATCH)
        if isinstance(action, Update):
            return await self.kube.request("PUT", target.item(action.name), body=action.body)
        body: dict[str, Any] = {}
        if action.propagation is not None:
            body["propagationPolicy"] = action.propagation
        body["preconditions"] = {"uid": action.uid}
        return await self.kube.request("DELETE", target.item(action.name), body=body)

    def _store(self, action: Apply | Create | Patch | Update | Delete,
               answer: Mapping[str, Any]) -> None:
        """The answer into the cache: a created, applied or patched object as it now is; a
        deleted one that is still there (a foreground deletion), or forgotten."""
        kind = action.target.kind
        if kind is None:
            return
        if isinstance(action, Delete):
            if action.forget is not None:
                self.cache[kind].delete(action.forget)
            elif answer.get("kind") == kind:
                self.cache[kind].upsert(answer)
            return
        if answer.get("kind") not in (None, "Status"):
            self.cache[kind].upsert(answer)

    async def _failed(self, action: Apply | Create | Patch | Update | Delete, exc: ApiException,
                      regarding: Mapping[str, Any], outcome: Outcome) -> None:
        """Apply the action's policy to a failed request (re-raising ``exc`` when it says
        so)."""
        policy = action.common.policy
        then = {404: policy.not_found, 409: policy.conflict}.get(int(exc.status or 0), Then.FAIL)
        if isinstance(action, Delete) and action.forget is not None \
                and then in (Then.SKIP, Then.REQUEUE) and action.target.kind is not None:
            self.cache[action.target.kind].delete(action.forget)
        if then is Then.SKIP:
            return
        if then is Then.REQUEUE:
            outcome.requeue_after = earliest(outcome.requeue_after, policy.requeue)
            return
        if then is Then.STOP:
            raise _Stop(policy.requeue)
        if then is Then.COLLECT:
            outcome.collected.append(f"{policy.reason_prefix}{policy.conflict_reason}")
            return
        self._record_failure(policy, exc, regarding, action.common.related)
        if policy.collect:
            outcome.collected.append(f"{policy.reason_prefix}{exc.reason}")
            return
        raise exc

    def _record_failure(self, policy: Policy, exc: ApiException,
                              regarding: Mapping[str, Any],
                              related: Mapping[str, Any] | None) -> None:
        if policy.failure is None:
            return
        event = policy.failure
        self.events.record(
            regarding, Event(event.reason, event.type, event.action,
                             event.note.replace("{reason}", str(exc.reason))), related=related)
