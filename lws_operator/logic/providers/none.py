"""The default scheduler: pods are placed one by one, nothing to prepare or admit (the pass does
not ask it: ``logic.providers.scheduled``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.logic.hash_mode.hash_groups import Admission
from lws_operator.logic.reconcile.plan import EMPTY, Plan, Planned
from lws_operator.logic.reconcile.snapshot import Observed

NO_FACTS: Planned[Mapping[str, Any] | None] = Planned(EMPTY, None)


class NoProvider:
    def prepare(self, obs: Observed) -> Plan:
        return EMPTY

    def groups(self, obs: Observed) -> Plan:
        return EMPTY

    def admit(self, obs: Observed, admission: Admission | None
              ) -> Planned[Mapping[str, Any] | None]:
        return NO_FACTS


PROVIDER = NoProvider()
