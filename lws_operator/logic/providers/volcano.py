"""Volcano (upstream's volcano provider (pkg/schedulerprovider)): a volcano PodGroup per leader
that is not being deleted, created when
missing, never updated, owned by the leader pod (``logic.placement.volcano``). A failed create is
recorded on the set (related to the leader) and the pass goes on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.logic.hash_mode.hash_groups import Admission
from lws_operator.logic.objects.events import failed_create
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.placement import volcano
from lws_operator.logic.reconcile.plan import (
    EMPTY,
    Action,
    Common,
    Create,
    Plan,
    Planned,
    Policy,
    Then,
    group,
)
from lws_operator.logic.reconcile.snapshot import Observed

NO_FACTS: Planned[Mapping[str, Any] | None] = Planned(EMPTY, None)  # no condition of its own

API = "scheduling.volcano.sh/v1beta1"


class VolcanoProvider:
    def prepare(self, obs: Observed) -> Plan:
        return EMPTY

    def groups(self, obs: Observed) -> Plan:
        target = group(API, obs.lws.namespace, "podgroups", "VolcanoPodGroup")
        actions: list[Action] = []
        for leader in obs.leaders:
            if meta_of(leader).get("deletionTimestamp"):
                continue
            body = volcano.pod_group(obs.body, leader)
            if body is None or name_of(body) in obs.volcano_groups:
                continue
            failure = failed_create(
                f"Failed to create volcano PodGroup {name_of(body)}: {{reason}}")
            actions.append(Create(target, body, common=Common(related=leader, policy=Policy(
                conflict=Then.SKIP, failure=failure, collect=True))))
        return Plan(tuple(actions))

    def admit(self, obs: Observed, admission: Admission | None
              ) -> Planned[Mapping[str, Any] | None]:
        return NO_FACTS


PROVIDER = VolcanoProvider()
