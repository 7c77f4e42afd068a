"""Group and subgroup keys, ordinal parsing and subgroup indices (upstream's pod_webhook.go)."""

from __future__ import annotations

import pytest

from lws_operator.logic.identity.keys import (
    group_key,
    parse_int,
    split_ordinal,
    subgroup_index,
    subgroup_key,
    trunc_div,
    trunc_mod,
)

# Digests computed with `printf '%s' <text> | sha1sum`, independently of the code under test.
SHA1_DEFAULT_TEST_1 = "86053e0d1617c866e4570d50f722cfc9c3e5d026"
SHA1_TEST_SAMPLE_1_SLASH_0 = "095fdab01c4ba6935cf75abe722d8af82c6d9079"
SHA1_TEST_SAMPLE_1_SLASH_1 = "d74e3eec6b977c017bb23a973f4b8bcba97e387b"


def test_group_key_hashes_namespace_and_leader_name() -> None:
    assert group_key("default", "test-1") == SHA1_DEFAULT_TEST_1


@pytest.mark.parametrize(
    ("leader", "index", "expected"),
    [
        ("test-sample-1", 0, SHA1_TEST_SAMPLE_1_SLASH_0),
        ("test-sample-1", "0", SHA1_TEST_SAMPLE_1_SLASH_0),
        ("test-sample-1", 1, SHA1_TEST_SAMPLE_1_SLASH_1),
    ],
)
def test_subgroup_key_hashes_leader_name_and_index(
    leader: str, index: int | str, expected: str
) -> None:
    assert subgroup_key(leader, index) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("test-1", ("test", 1)),
        ("test-1-3", ("test-1", 3)),
        ("test-sample-10-12", ("test-sample-10", 12)),
        ("a-007", ("a", 7)),
        ("-3", ("", 3)),
        ("a-0", ("a", 0)),
        ("a-2147483647", ("a", 2147483647)),
        ("a-2147483648", None),
        ("a-99999999999999999999", None),
        ("test", None),
        ("test-", None),
        ("test-1a", None),
        ("test-+1", None),
        ("test--1", ("test-", 1)),
        ("test-1\n", None),
        ("", None),
    ],
)
def test_split_ordinal(name: str, expected: tuple[str, int] | None) -> None:
    assert split_ordinal(name) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5", 5),
        ("0", 0),
        ("007", 7),
        ("+5", 5),
        ("-3", -3),
        ("9223372036854775807", 9223372036854775807),
        ("-9223372036854775808", -9223372036854775808),
    ],
)
def test_parse_int_accepts_go_decimals(text: str, expected: int) -> None:
    assert parse_int(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "invalid syntax"),
        ("abc", "invalid syntax"),
        (" 5", "invalid syntax"),
        ("5 ", "invalid syntax"),
        ("5\n", "invalid syntax"),
        ("1_000", "invalid syntax"),
        ("\u0663", "invalid syntax"),  # ARABIC-INDIC DIGIT THREE: int() takes it, Go does not
        ("1.0", "invalid syntax"),
        ("0x10", "invalid syntax"),
        ("+", "invalid syntax"),
        ("9223372036854775808", "value out of range"),
        ("-9223372036854775809", "value out of range"),
    ],
)
def test_parse_int_rejects_what_go_rejects(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=f"^{reason}$"):
        parse_int(text)


@pytest.mark.parametrize(
    ("a", "b", "quotient", "remainder"),
    [
        (7, 2, 3, 1),
        (-1, 5, 0, -1),
        (-7, 2, -3, -1),
        (7, -2, -3, 1),
        (-7, -2, 3, -1),
        (0, 3, 0, 0),
    ],
)
def test_truncating_division_matches_go(a: int, b: int, quotient: int, remainder: int) -> None:
    assert (trunc_div(a, b), trunc_mod(a, b)) == (quotient, remainder)


def test_truncating_division_by_zero_raises() -> None:
    with pytest.raises(ValueError, match="division by zero"):
        trunc_div(1, 0)


# Upstream's subgroup indices, one row per (size, subgroup size) with every worker of the group.
@pytest.mark.parametrize(
    ("size", "subgroup_size", "expected"),
    [
        (4, 2, {1: 0, 2: 1, 3: 1}),
        (5, 2, {1: 0, 2: 0, 3: 1, 4: 1}),
        (9, 8, dict.fromkeys(range(1, 9), 0)),
        (5, 1, {1: 1, 2: 2, 3: 3, 4: 4}),
        (10, 5, {1: 0, 2: 0, 3: 0, 4: 0, 5: 1, 6: 1, 7: 1, 8: 1, 9: 1}),
        (11, 5, {**dict.fromkeys(range(1, 6), 0), **dict.fromkeys(range(6, 11), 1)}),
        (8, 4, {1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}),
    ],
)
def test_subgroup_index_table(size: int, subgroup_size: int, expected: dict[int, int]) -> None:
    assert {w: subgroup_index(size, subgroup_size, w) for w in expected} == expected


def test_subgroup_index_truncates_toward_zero_like_go() -> None:
    # A pod named `x-0` without a worker-index label is a worker with ordinal 0: (0-1)/2 is 0 in
    # Go, where Python's floor division would give -1.
    assert subgroup_index(5, 2, 0) == 0


def test_subgroup_index_rejects_zero_subgroup_size() -> None:
    with pytest.raises(ValueError, match="subgroup size must not be 0"):
        subgroup_index(4, 0, 1)
