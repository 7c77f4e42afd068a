"""A DisaggregatedSet role's rollout budget: its ``rollingUpdateConfiguration`` in groups.

Each role's LeaderWorkerSet spec may carry ``rolloutStrategy.rollingUpdateConfiguration``; the
DisaggregatedSet controller reads only its ``maxSurge`` and ``maxUnavailable`` and turns them into
the planner's :class:`RoleBudget` (upstream's extractRollingUpdateConfig, executor.go):

* no configuration (``rolloutStrategy`` absent: the schema does not default it), or a role that
  is no longer in the spec (it only drains): the controller's own ``(surge 1, unavailable 0)``;
* otherwise both values are scaled against the role's target with no scaler fallback
  (``targetReplicas(role, scalers, 0)``, passed in as ``target``): an integer is itself, ``"N%"``
  is ``ceil(N * target / 100)`` for surge and ``floor(...)`` for unavailable, and anything else
  counts as 0 (apimachinery's GetScaledValueFromIntOrPercent, whose error upstream drops);
* a positive unavailable takes both values (``maxSurge: 0`` only takes effect with it); else a
  positive surge takes the surge with unavailable 0; else (0/0) the default stays, so a rollout
  always progresses.

The scaling is exact integer arithmetic (no float rounding of ``N * target / 100``).
Negative integers (which LeaderWorkerSet validation rejects but the DisaggregatedSet schema does
not) are kept as upstream keeps them: a negative unavailable is "not positive", a negative surge
with a positive unavailable narrows the surge bound, exactly as the Go controller plans.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from lws_operator.api.disaggregated import DisaggregatedSetView, RoleView
from lws_operator.logic.disaggregated.planner import DEFAULT_BUDGET, RoleBudget

_PERCENT = re.compile(r"^([+-]?[0-9]+)%$")


def scaled(value: Any, total: int, round_up: bool) -> int:
    """An int-or-percent against ``total``: integers are themselves, ``"N%"`` is
    ``N * total / 100`` rounded up or down exactly, anything else (a bare numeric string, a
    malformed percentage, an absent value) is 0."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if match:
            product = int(match.group(1)) * total
            return -(-product // 100) if round_up else product // 100
    return 0


def budget_from(config: Mapping[str, Any] | None, target: int) -> RoleBudget:
    """The budget for one ``rollingUpdateConfiguration`` (None: the default) against ``target``."""
    if config is None:
        return DEFAULT_BUDGET
    surge = scaled(config.get("maxSurge"), target, round_up=True)
    unavailable = scaled(config.get("maxUnavailable"), target, round_up=False)
    if unavailable > 0:
        return RoleBudget(surge, unavailable)
    if surge > 0:
        return RoleBudget(surge, 0)
    return DEFAULT_BUDGET


def role_budget(role: RoleView | None, target: int) -> RoleBudget:
    """The planner budget of one role of the role universe: ``role`` is None for a role only old
    revisions still have (it drains with the default budget); ``target`` is the role's replica
    target resolved without a scaler fallback (``targetReplicas(role, scalers, 0)``)."""
    if role is None:
        return DEFAULT_BUDGET
    return budget_from(role.rolling_update_configuration, target)


def role_budgets(ds: DisaggregatedSetView, universe: Sequence[str],
                 targets: Mapping[str, int]) -> tuple[RoleBudget, ...]:
    """The planner's budget vector for the role universe (spec roles in spec order, then the
    removed ones): each spec role's configuration against its target in ``targets`` (resolved
    with no scaler fallback; a role missing there counts 0), the default for removed roles."""
    return tuple(role_budget(ds.role(name), int(targets.get(name, 0))) for name in universe)
