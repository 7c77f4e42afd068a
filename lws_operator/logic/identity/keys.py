"""Group identity derived from pod names: group and subgroup keys, ordinals, subgroup indices.

A pod's place in a LeaderWorkerSet is written nowhere but its name (`<lws>-<i>` for a leader,
`<lws>-<i>-<j>` for a worker) and a few template annotations. Pods created by the upstream Go
controller and by us must land on identical labels, so every derivation here reproduces upstream's
arithmetic to the bit: SHA-1 keys over the same strings, StatefulSet ordinal parsing bounded to
int32, Go's strict decimal parsing, and Go's truncating division where an operand can be negative.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from lws_operator.api.constants import MAX_INT32

_ORDINAL: Final = re.compile(r"(.*)-([0-9]+)")
_DECIMAL: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def sha1_hex(text: str) -> str:
    """Lowercase hex SHA-1 of the UTF-8 text: 40 characters, safe as a label value."""
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def group_key(namespace: str, leader_name: str) -> str:
    """The `group-key` of a group: stable across recreations because leader names are."""
    return sha1_hex(f"{namespace}/{leader_name}")


def subgroup_key(leader_name: str, subgroup_index: int | str) -> str:
    """The `subgroup-key`. The namespace is deliberately absent (upstream's pod webhook Default
    (pod_webhook.go)): the leader and the
    workers of subgroup 0 agree because a worker's `leader-name` annotation is the leader's name."""
    return sha1_hex(f"{leader_name}/{subgroup_index}")


def split_ordinal(pod_name: str) -> tuple[str, int] | None:
    """Split `<parent>-<ordinal>` the way a StatefulSet names its pods.

    The last dash-separated run of digits is the ordinal (leading zeros allowed). Returns None when
    there is no such suffix or the ordinal does not fit in int32; the parent may be empty
    (`"-3"` gives `("", 3)`).
    """
    match = _ORDINAL.fullmatch(pod_name)
    if match is None:
        return None
    ordinal = int(match.group(2))
    if ordinal > MAX_INT32:
        return None
    return match.group(1), ordinal


def parse_int(text: str) -> int:
    """Parse a decimal exactly as Go's `strconv.Atoi` does on 64-bit platforms.

    Python's `int()` is looser (surrounding spaces, `_` separators, non-ASCII digits), and a value
    upstream rejects must be rejected here too. Raises ValueError with the reason
    (`invalid syntax` or `value out of range`).
    """
    if _DECIMAL.fullmatch(text) is None:
        raise ValueError("invalid syntax")
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError("value out of range")
    return value


def trunc_div(a: int, b: int) -> int:
    """Integer division rounding toward zero (Go's `/`); Python's `//` floors instead.

    They differ only on negative operands, which a hand-made pod can supply (a worker ordinal of
    0 gives `w - 1 == -1`)."""
    if b == 0:
        raise ValueError("division by zero")
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def trunc_mod(a: int, b: int) -> int:
    """Remainder with the sign of the dividend (Go's `%`), the companion of `trunc_div`."""
    return a - b * trunc_div(a, b)


def subgroup_index(size: int, subgroup_size: int, worker_index: int) -> int:
    """The subgroup of a worker (upstream's pod webhook Default (pod_webhook.go)).

    When only `size - 1` divides evenly, the leader is the extra pod of subgroup 0 and workers
    count from 1; otherwise workers count from 0 alongside the leader. The subgroup policy type
    plays no part. With a subgroup size of 1 both divide, so worker `w` lands in subgroup `w`, and
    under LeaderExcluded subgroup 0 stays empty (as upstream has it).
    Raises ValueError for a subgroup size of 0 (upstream would panic).
    """
    if subgroup_size == 0:
        raise ValueError("subgroup size must not be 0")
    leader_is_extra = (
        trunc_mod(size - 1, subgroup_size) == 0 and trunc_mod(size, subgroup_size) != 0
    )
    if leader_is_extra:
        return trunc_div(worker_index - 1, subgroup_size)
    return trunc_div(worker_index, subgroup_size)
