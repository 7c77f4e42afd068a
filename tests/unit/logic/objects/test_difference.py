"""The "already in place" check of a pass: a desired object contained in the live one."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.logic.objects.difference import contains


@pytest.mark.parametrize(
    ("desired", "live", "expected"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, True),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 3}}, True),
        ({"a": [{"n": 1}]}, {"a": [{"n": 1, "x": 0}]}, True),
        ({"a": [{"n": 1}]}, {"a": [{"n": 1}, {"n": 2}]}, False),
        ({"a": 1}, {"a": 2}, False),
        ({"a": 1}, {}, False),
        ({"a": None}, {}, True),
        ({"a": "1"}, {"a": 1}, False),
        ({"a": {"b": 1}}, {"a": "x"}, False),
        # Empty values the API server drops from omitempty fields (found by the bad-input
        # fuzzing: a template with `args: []` or an env var `value: ""` was re-applied on
        # every pass).
        ({"env": [{"name": "M", "value": ""}]}, {"env": [{"name": "M"}]}, True),
        ({"args": []}, {}, True),
        ({"a": {}}, {}, True),
        ({"hostNetwork": False}, {}, True),
        ({"a": ""}, {"a": "x"}, False),
        ({"args": []}, {"args": ["x"]}, False),
        ({"a": 0}, {}, False),
    ],
)
def test_contains(desired: Any, live: Any, expected: bool) -> None:
    assert contains(desired, live) is expected
