"""The JSON patch builder, checked against an independent RFC 6902 implementation."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from lws_operator.admission.patch import diff, same

json_leaf = st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab~/", max_size=3)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text("ab~/.", max_size=4), inner, max_size=4),
    max_leaves=20,
)
json_object = st.dictionaries(st.text("ab~/.", max_size=4), json_value, max_size=5)


def apply(doc: dict[str, Any], ops: list[dict[str, Any]]) -> Any:
    return jsonpatch.apply_patch(copy.deepcopy(doc), ops)


@settings(max_examples=300, deadline=None)
@given(json_object, json_object)
def test_patch_turns_old_into_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert same(apply(old, diff(old, new)), new)


@settings(max_examples=100, deadline=None)
@given(json_object)
def test_equal_objects_give_no_patch(doc: dict[str, Any]) -> None:
    assert diff(doc, copy.deepcopy(doc)) == []


def test_label_keys_with_slashes_are_escaped() -> None:
    old = {"metadata": {"labels": {"a": "1"}}}
    new = {"metadata": {"labels": {"a": "1", "leaderworkerset.sigs.k8s.io/group-index": "0"}}}
    assert diff(old, new) == [{"op": "add",
                               "path": "/metadata/labels/leaderworkerset.sigs.k8s.io~1group-index",
                               "value": "0"}]


def test_bool_and_int_differ() -> None:
    assert diff({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]


def test_env_added_to_one_container_touches_only_that_container() -> None:
    old: dict[str, Any] = {"spec": {"containers": [
        {"name": "a", "env": [{"name": "X", "value": "1"}]},
                                   {"name": "b"}]}}
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["env"].insert(0, {"name": "LWS_LEADER_ADDRESS", "value": "h"})
    ops = diff(old, new)
    assert all(op["path"].startswith("/spec/containers/0/env") for op in ops)
    assert apply(old, ops) == new


def test_bool_and_int_differ_inside_lists_and_objects() -> None:
    # ``==`` holds for both pairs; their JSON texts differ, so the walk decides
    assert diff({"a": [1]}, {"a": [True]}) == [{"op": "replace", "path": "/a/0", "value": True}]
    assert diff({"a": {"b": False}}, {"a": {"b": 0}}) == [
        {"op": "replace", "path": "/a/b", "value": 0}]


def test_values_equal_but_written_differently_are_the_same() -> None:
    # keys in another order, 1 and 1.0, an integer orjson cannot write: no text match, walked
    assert diff({"a": {"x": 1, "y": 2}}, {"a": {"y": 2, "x": 1}}) == []
    assert diff({"a": [1]}, {"a": [1.0]}) == []
    assert diff({"a": [2**70]}, {"a": [2**70]}) == []
    assert diff({"a": [2**70]}, {"a": [2**70 + 1]}) == [
        {"op": "replace", "path": "/a/0", "value": 2**70 + 1}]
