"""Answers and watch events are decoded with orjson (``kube.client.loads``), which must give
exactly what the standard library gives for anything the API server sends (integers up to
int64, floats, escapes), including where orjson alone would refuse (an escaped lone
surrogate)."""

from __future__ import annotations

import json

import pytest

from lws_operator.kube.client import loads


@pytest.mark.parametrize("text", [
    '{"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"x": [1, 2.5]}}',
    '{"max": 9223372036854775807, "min": -9223372036854775808, "count": 3}',
    '{"unicode": "\\u00e9t\\u00e9 \\ud83d\\ude00", "null": null, "t": true, "f": false}',
    '{"lone": "\\ud800"}',
    '{"float": 1e-7, "exp": 6.02e23, "zero": -0.0}',
], ids=["object", "int64", "escapes", "lone surrogate", "floats"])
def test_the_same_as_the_standard_library(text: str) -> None:
    decoded = loads(text.encode())
    assert decoded == json.loads(text)
    assert json.dumps(decoded) == json.dumps(json.loads(text))  # types too (int vs float)


def test_invalid_json_is_refused_as_the_standard_library_refuses_it() -> None:
    with pytest.raises(ValueError, match="Expecting"):
        loads(b'{"a": ')
