"""The JSON patch builder: its operations are ``jsonpatch``'s, for the changed parts only; each
patch is checked by applying it."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from lws_operator.admission.patch import changed, diff, same

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
    assert ops == [{"op": "add", "path": "/spec/containers/0/env/0",
                    "value": {"name": "LWS_LEADER_ADDRESS", "value": "h"}}]
    assert apply(old, ops) == new


def test_only_the_changed_parts_are_handed_to_jsonpatch() -> None:
    old: dict[str, Any] = {"metadata": {"labels": {"a": "1"}, "name": "p"},
                           "spec": {"containers": [{"name": "a", "env": []}, {"name": "b"}]}}
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["b/c"] = "2"
    new["spec"]["containers"][0]["env"].append({"name": "X"})
    assert list(changed(old, new)) == [
        (["metadata", "labels"], {"a": "1"}, {"a": "1", "b/c": "2"}),
        (["spec", "containers", 0, "env"], [], [{"name": "X"}])]


def test_a_move_inside_a_changed_part_is_prefixed_on_both_ends() -> None:
    old = {"a/b": {"l": [{"x": 1}, {"y": 2}, {"z": 3}], "k": 1}}
    new = {"a/b": {"l": [{"y": 2}, {"z": 3}, {"x": 1}, {"w": 0}], "k": 1}}
    ops = diff(old, new)
    assert ops == [{"op": "move", "from": "/a~1b/l/0", "path": "/a~1b/l/2"},
                   {"op": "add", "path": "/a~1b/l/3", "value": {"w": 0}}]
    assert apply(old, ops) == new


def test_a_changed_root_is_replaced_whole() -> None:
    assert diff([1], [1, 2]) == [{"op": "add", "path": "/1", "value": 2}]
    assert diff(1, True) == [{"op": "replace", "path": "", "value": True}]


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
