"""Scheduler providers: how a set's groups are scheduled as gangs.

A provider answers three questions of a pass, in this order, each with a plan
(``logic.reconcile.plan``): ``prepare`` the set-level scheduling object (the native Workload),
create the per-group objects (``groups``: PodGroups), and ``admit`` member pods (lift the gates of
leaders whose PodGroups exist, clean up what nothing needs). A plan that ends the pass there says
the pods may not be created yet. The pipeline (``logic.reconcile.pipeline``) asks the provider the
set's spec and the operator's options choose (``provider_of``); a new provider is one module
implementing ``Provider`` and one line in ``provider_of``.

* ``none``: the default scheduler places pods one by one; nothing to do.
* ``native``: ``spec.scheduling`` asks for Kubernetes' own Workload and PodGroup
  (``logic.placement.gang``).
* ``volcano``: ``--scheduler-provider=volcano``: a volcano PodGroup per group
  (``logic.placement.volcano``, upstream's volcano provider (pkg/schedulerprovider)).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from lws_operator.api.constants import SCHEDULER_PROVIDER_VOLCANO
from lws_operator.logic.placement import gang
from lws_operator.logic.placement.providers import native, none, volcano
from lws_operator.logic.reconcile.plan import Plan
from lws_operator.logic.reconcile.snapshot import Observed, Options


class Provider(Protocol):
    def prepare(self, obs: Observed) -> Plan: ...
    def groups(self, obs: Observed) -> Plan: ...
    def admit(self, obs: Observed) -> Plan: ...


def provider_of(obs: Observed) -> Provider:
    return provider_for(obs.body, obs.options)


def provider_for(body: Mapping[str, Any], options: Options) -> Provider:
    """``spec.scheduling`` (native) first, then the operator's ``--scheduler-provider``."""
    if gang.level_of(body) is not None:
        return native.PROVIDER
    if options.provider == SCHEDULER_PROVIDER_VOLCANO:
        return volcano.PROVIDER
    return none.PROVIDER


def scheduled(body: Mapping[str, Any], options: Options) -> bool:
    """Whether a provider other than ``none`` schedules the set: ``none`` plans nothing, so
    without one the pipeline skips the three hooks (``logic.reconcile.pipeline.NEEDED``)."""
    return provider_for(body, options) is not none.PROVIDER


def prepare(obs: Observed) -> Plan:
    return provider_of(obs).prepare(obs)


def groups(obs: Observed) -> Plan:
    return provider_of(obs).groups(obs)


def admit(obs: Observed) -> Plan:
    return provider_of(obs).admit(obs)
