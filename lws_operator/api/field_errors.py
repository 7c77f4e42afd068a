"""Field errors as apimachinery renders them, and the checks both validating webhooks share.

The LeaderWorkerSet webhook (``api.validation``) and the DisaggregatedSet webhook
(``api.disaggregated_validation``) report the same way upstream's do: a ``field.Error`` per
rule, joined as ``field.ErrorList.ToAggregate()`` joins them. The int-or-percent budgets and
immutability are checked alike on both kinds, so they live here once."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

ErrorType = Literal["Invalid", "Required", "Forbidden", "NotSupported"]

_PERCENT = re.compile(r"^[0-9]+%$")
PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
    "'93%', regex used for validation is '[0-9]+%')"
)
IMMUTABLE = "field is immutable"

SPEC = "spec"
LWT = "spec.leaderWorkerTemplate"
RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"
SUBGROUP_SIZE = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"


@dataclass(frozen=True)
class FieldError:
    """One field error, rendered like apimachinery's ``field.Error``."""

    path: str
    message: str
    value: Any = None
    type: ErrorType = "Invalid"

    def __str__(self) -> str:
        if self.type == "Invalid":
            return f"{self.path}: Invalid value: {_render(self.value)}: {self.message}"
        if self.type == "Required":
            return f"{self.path}: Required value" + (f": {self.message}" if self.message else "")
        if self.type == "NotSupported":
            return f"{self.path}: Unsupported value: {_render(self.value)}: {self.message}"
        return f"{self.path}: Forbidden: {self.message}"


def _render(value: Any) -> str:
    """A value the way apimachinery's ``field.Error`` prints it: numbers and booleans bare,
    strings quoted, anything else (a pointer included) as its JSON, so a nil one is ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def aggregate_message(errors: list[FieldError]) -> str:
    """``field.ErrorList.ToAggregate().Error()``: the message upstream's webhook denies with.

    Errors with the same text are kept once; one error is its own text, several are joined
    with ``", "`` inside brackets."""
    rendered = list(dict.fromkeys(str(e) for e in errors))
    return "".join(rendered) if len(rendered) <= 1 else "[" + ", ".join(rendered) + "]"




def field_at(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scaled_value(value: Any, total: int, round_up: bool) -> int | None:
    """An int-or-percent scaled against ``total`` (None when it is neither), like apimachinery's
    ``GetScaledValueFromIntOrPercent``: percentages round up or down as asked."""
    if int_or_none(value) is not None:
        return int(value)
    if isinstance(value, str) and _PERCENT.match(value):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return None


def validate_int_or_percent(path: str, value: Any) -> list[FieldError]:
    """apimachinery's IntOrPercent checks (a non-negative int, or a percent string of at most
    100%); None is not checked. The DisaggregatedSet webhook applies them to its roles too."""
    if value is None:
        return []
    if int_or_none(value) is not None:
        if value < 0:
            return [FieldError(path, "must be greater than or equal to 0", value)]
        return []
    if not isinstance(value, str):
        return [FieldError(path, "invalid value", value)]
    if not _PERCENT.match(value):
        return [FieldError(path, PERCENT_MESSAGE, value)]
    if int(value[:-1]) > 100:
        return [FieldError(path, "must not be greater than 100%", value)]
    return []


def _omitempty(value: Any) -> Any:
    """``value`` without the entries that mean "not set": null, ``""`` and ``[]``, at any depth.

    Go drops such zero values when it writes an object (``omitempty``), and apimachinery's
    semantic equality takes an empty list for a missing one, so a stored object may hold either
    form of the same thing. Empty objects are kept: ``gang: {}`` selects a policy."""
    if isinstance(value, dict):
        kept = {k: _omitempty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, "", [])}
    if isinstance(value, list):
        return [_omitempty(v) for v in value]
    return value


def immutable(path: str, old: Any, new: Any) -> list[FieldError]:
    """``ValidateImmutableField``: the new value, reported as ``field is immutable``."""
    if _omitempty({"v": old}) == _omitempty({"v": new}):
        return []
    return [FieldError(path, IMMUTABLE, new)]


