"""The default scheduler: pods are placed one by one, nothing to prepare or admit."""

from __future__ import annotations

from lws_operator.logic.reconcile.plan import EMPTY, Plan
from lws_operator.logic.reconcile.snapshot import Observed


class NoProvider:
    def prepare(self, obs: Observed) -> Plan:
        return EMPTY

    def groups(self, obs: Observed) -> Plan:
        return EMPTY

    def admit(self, obs: Observed) -> Plan:
        return EMPTY


PROVIDER = NoProvider()
