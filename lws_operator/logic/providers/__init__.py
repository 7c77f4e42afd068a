"""Scheduler providers: how a set's groups are scheduled as gangs.

A provider answers three questions of a pass, in this order, each with a plan
(``logic.reconcile.plan``): ``prepare`` the set-level scheduling object (the native Workload),
create the per-group objects (``groups``: PodGroups), and ``admit`` member pods (lift the gates of
leaders whose PodGroups exist, clean up what nothing needs). A plan that ends the pass there says
the pods may not be created yet. ``admit`` is handed the admission of a Hash set's leaders (only
those may lose their gates) and its value is the facts of the scheduling condition, which the pass
hands to the status step. The pass (``logic.leaderworkerset.pipeline``) asks the provider the
set's spec and the operator's options choose (``provider_for``), and asks nothing without one
(``none``); a new provider is one module implementing ``Provider`` and one line in ``provider_for``.

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
from lws_operator.logic.hash_mode.hash_groups import Admission
from lws_operator.logic.placement import gang
from lws_operator.logic.providers import native, none, volcano
from lws_operator.logic.reconcile.plan import Plan, Planned
from lws_operator.logic.reconcile.snapshot import Observed, Options

# The facts of the scheduling condition (``gang.scheduling_condition``'s keyword arguments).
Facts = Mapping[str, Any]


class Provider(Protocol):
    def prepare(self, obs: Observed) -> Plan: ...
    def groups(self, obs: Observed) -> Plan: ...
    def admit(self, obs: Observed, admission: Admission | None) -> Planned[Facts | None]: ...


def provider_for(body: Mapping[str, Any], options: Options) -> Provider:
    """``spec.scheduling`` (native) first, then the operator's ``--scheduler-provider``."""
    if gang.level_of(body) is not None:
        return native.PROVIDER
    if options.provider == SCHEDULER_PROVIDER_VOLCANO:
        return volcano.PROVIDER
    return none.PROVIDER


def scheduled(body: Mapping[str, Any], options: Options) -> Provider | None:
    """The provider that schedules the set, None for ``none``, which plans nothing (the pass
    asks nothing of it)."""
    provider = provider_for(body, options)
    return None if provider is none.PROVIDER else provider
