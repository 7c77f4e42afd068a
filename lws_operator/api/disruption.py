"""The group disruption budget's annotation (ours): how its value is written and read.

``lws-operator.dev/max-disrupted-groups`` on a LeaderWorkerSet says how many of its groups may be
voluntarily disrupted (evicted) at once: a count (``"1"``) or a percentage of ``spec.replicas``
(``"25%"``). A percentage rounds up, as a PodDisruptionBudget's ``maxUnavailable`` does
(apimachinery's ``GetScaledValueFromIntOrPercent`` with rounding up, which the disruption
controller uses for it), so any percentage above 0 of a set with groups allows at least one.
``"0"`` (or ``"0%"``) refuses every eviction of a healthy group, as ``maxUnavailable: 0`` does.
The validating webhook checks the value (``api.validation``); the pure decision reads it through
:func:`budget_of` (``logic.disruption.budget``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import MAX_DISRUPTED_GROUPS_ANNOTATION

_COUNT = re.compile(r"^[0-9]+$")
_PERCENT = re.compile(r"^([0-9]+)%$")
FORMAT_MESSAGE = ("must be a number of groups (e.g. '1') or a percentage of spec.replicas "
                  "(e.g. '25%')")


class BadBudget(ValueError):
    """The annotation's value is neither a count nor a percentage of at most 100%."""


def parse(value: Any) -> int | str:
    """The value as written: an int count or a ``"N%"`` string; ``BadBudget`` otherwise."""
    if isinstance(value, str) and _COUNT.match(value):
        return int(value)
    if isinstance(value, str) and (match := _PERCENT.match(value)):
        if int(match.group(1)) > 100:
            raise BadBudget("must not be greater than 100%")
        return value
    raise BadBudget(FORMAT_MESSAGE)


def resolve(value: int | str, replicas: int) -> int:
    """The number of groups a parsed value allows for ``replicas`` groups (percentages round
    up, as a PodDisruptionBudget's ``maxUnavailable`` does)."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value[:-1]) * replicas / 100)


def budget_of(annotations: Mapping[str, Any], replicas: int) -> int | None:
    """The set's budget in groups, or None when it has none (not annotated, or a value the
    webhook would have refused: a set stored before the webhook ran is not guarded rather
    than guarded by a guess)."""
    raw = annotations.get(MAX_DISRUPTED_GROUPS_ANNOTATION)
    if raw is None:
        return None
    try:
        return resolve(parse(raw), replicas)
    except BadBudget:
        return None
