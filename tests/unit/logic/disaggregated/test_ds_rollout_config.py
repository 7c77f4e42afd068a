"""A DisaggregatedSet role's rollout budget (upstream's executor_test.go TestGetRoleConfigs,
TestExtractRollingUpdateConfig and TestExtractRollingUpdateConfigWithPercentages, in order),
plus the int-or-percent scaling's exact rounding and its "anything else is 0" rule."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.disaggregated import DisaggregatedSetView, RoleView
from lws_operator.logic.disaggregated.planner import RoleBudget
from lws_operator.logic.disaggregated.rollout_config import (
    budget_from,
    role_budget,
    role_budgets,
    scaled,
)


def role(name: str, replicas: int, config: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas,
                            "leaderWorkerTemplate": {"workerTemplate": {"spec": {}}}}
    if config is not None:
        spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": config}
    return {"name": name, "spec": spec}


def ds(*roles: dict[str, Any]) -> DisaggregatedSetView:
    return DisaggregatedSetView({"metadata": {"name": "ds", "namespace": "ns"},
                                 "spec": {"roles": list(roles)}})


def test_role_configs_expose_each_role_spec() -> None:  # 106
    view = ds(role("prefill", 3), role("decode", 5))
    prefill, decode = view.role("prefill"), view.role("decode")
    assert prefill is not None
    assert decode is not None
    assert (prefill.replicas, decode.replicas) == (3, 5)
    assert prefill.spec["leaderWorkerTemplate"] == {"workerTemplate": {"spec": {}}}


# 107-113: TestExtractRollingUpdateConfig (replicas prefill 3, decode 2).
EXTRACT = [
    ("defaults_when_nil", None, None, RoleBudget(1, 0), RoleBudget(1, 0)),
    ("custom_prefill_only", {"maxSurge": 3, "maxUnavailable": 1}, None,
     RoleBudget(3, 1), RoleBudget(1, 0)),
    ("custom_decode_only", None, {"maxSurge": 2, "maxUnavailable": 0},
     RoleBudget(1, 0), RoleBudget(2, 0)),
    ("partial_prefill_surge_only", {"maxSurge": 5}, None, RoleBudget(5, 0), RoleBudget(1, 0)),
    ("both_custom", {"maxSurge": 2, "maxUnavailable": 1}, {"maxSurge": 3, "maxUnavailable": 2},
     RoleBudget(2, 1), RoleBudget(3, 2)),
    ("surge0_with_unavail_allows_zero_surge", {"maxSurge": 0, "maxUnavailable": 4},
     {"maxSurge": 0, "maxUnavailable": 2}, RoleBudget(0, 4), RoleBudget(0, 2)),
    ("surge0_without_unavail_keeps_default", {"maxSurge": 0, "maxUnavailable": 0},
     {"maxSurge": 0, "maxUnavailable": 0}, RoleBudget(1, 0), RoleBudget(1, 0)),
]


@pytest.mark.parametrize(("prefill", "decode", "want_prefill", "want_decode"),
                         [case[1:] for case in EXTRACT], ids=[case[0] for case in EXTRACT])
def test_extract_rolling_update_config(prefill: dict[str, Any] | None,
                                       decode: dict[str, Any] | None,
                                       want_prefill: RoleBudget, want_decode: RoleBudget) -> None:
    view = ds(role("prefill", 3, prefill), role("decode", 2, decode))
    budgets = role_budgets(view, ("prefill", "decode"), {"prefill": 3, "decode": 2})
    assert budgets == (want_prefill, want_decode)


# 114-117: TestExtractRollingUpdateConfigWithPercentages.
@pytest.mark.parametrize(("surge", "unavailable", "replicas", "expected"), [
    ("50%", "0", 4, RoleBudget(2, 0)),
    ("0", "25%", 4, RoleBudget(0, 1)),
    ("25%", "25%", 10, RoleBudget(3, 2)),
    ("100%", "0", 5, RoleBudget(5, 0)),
], ids=["surge_50pct_of_4", "unavail_25pct_of_4", "both_25pct_of_10", "surge_100pct_of_5"])
def test_extract_rolling_update_config_with_percentages(surge: str, unavailable: str,
                                                        replicas: int,
                                                        expected: RoleBudget) -> None:
    view = ds(role("prefill", replicas, {"maxSurge": surge, "maxUnavailable": unavailable}),
              role("decode", 1))
    assert role_budget(view.role("prefill"), replicas) == expected


def test_removed_role_uses_the_default() -> None:
    """A role only an old revision still has drains with (1, 0), whatever the spec says."""
    view = ds(role("prefill", 3, {"maxSurge": 0, "maxUnavailable": 2}), role("decode", 2))
    assert role_budget(None, 5) == RoleBudget(1, 0)
    assert role_budgets(view, ("prefill", "decode", "encode"), {"prefill": 3, "decode": 2}) == (
        RoleBudget(0, 2), RoleBudget(1, 0), RoleBudget(1, 0))


def test_percentages_scale_against_the_target_passed_in() -> None:
    """An External role with no scaler resolves to 0 replicas, so percentages collapse to 0 and
    the default applies (the rollout still moves)."""
    config = RoleView(role("decode", 9, {"maxSurge": "50%", "maxUnavailable": "50%"}))
    assert role_budget(config, 0) == RoleBudget(1, 0)
    assert role_budget(config, 9) == RoleBudget(5, 4)


@pytest.mark.parametrize(("value", "total", "round_up", "expected"), [
    (3, 10, True, 3),
    ("33%", 10, True, 4),        # 3.3 up
    ("33%", 10, False, 3),       # 3.3 down
    ("1%", 1, True, 1),          # 0.01 up
    ("1%", 1, False, 0),
    ("29%", 100, True, 29),      # exact products stay themselves either way
    ("57%", 100, False, 57),
    ("0%", 7, True, 0),
    ("3", 10, True, 0),          # a bare numeric string is not an int-or-percent
    ("abc%", 10, True, 0),
    ("", 10, True, 0),
    (None, 10, True, 0),
    (True, 10, True, 0),         # a boolean is not an integer here
    (-2, 10, True, -2),
    ("-15%", 10, True, -1),      # ceil(-1.5)
    ("-15%", 10, False, -2),     # floor(-1.5)
])
def test_scaled(value: Any, total: int, round_up: bool, expected: int) -> None:
    assert scaled(value, total, round_up) == expected


def test_negative_unavailable_is_not_positive() -> None:
    assert budget_from({"maxSurge": 2, "maxUnavailable": -1}, 4) == RoleBudget(2, 0)
    assert budget_from({"maxSurge": -1, "maxUnavailable": 0}, 4) == RoleBudget(1, 0)
