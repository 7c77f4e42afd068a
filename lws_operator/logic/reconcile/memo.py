"""Results of pure derivations, reused while their inputs are the very same objects.

A pass builds a snapshot before each of its steps (``logic.reconcile.snapshot``), and most steps
derive the same facts from it again: the leader pods, the leader StatefulSet, the revision key of
the templates, the desired leader StatefulSet. Between two steps, and often between two passes, the
watch cache has not changed for the set, so the snapshot holds the same objects and every such
fact is the same. A ``Memo`` keeps the last result of each named derivation together with the
inputs it was computed from, and hands it out again only when it is asked with the identical
input objects (``is``; scalars by value); any other input computes afresh and replaces it.

This is not memory in the sense of docs/architecture.md "No hidden memory": nothing is decided
from it. A result is reused only for the inputs it was computed from, so dropping a memo, or
never having one (the tests' snapshots), gives the same answers at a higher cost. The watch
cache never changes an object it stores in place (it replaces it), which is what makes the
identity of an object stand for its content. Bounded: one result per name, one memo per
LeaderWorkerSet, dropped with it (``controllers.leaderworkerset``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from itertools import compress
from operator import is_, is_not
from typing import Any, TypeVar

T = TypeVar("T")
Item = TypeVar("Item")
# Compared by value: immutable, and equal exactly when their content is (a frozenset of names).
_SCALARS = (str, int, float, bool, type(None), frozenset)


def _same(a: object, b: object) -> bool:
    return a is b or (type(a) in _SCALARS and type(a) is type(b) and a == b)


class Memo:
    """The last result of each named derivation, with its inputs (module docstring)."""

    __slots__ = ("_entries", "_selections")

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[object, ...], Any]] = {}
        # Per name: the objects of the last selection, each one's verdict in their order,
        # and the objects kept (``select``).
        self._selections: dict[str, tuple[tuple[Any, ...], list[bool], tuple[Any, ...]]] = {}

    def get(self, name: str, inputs: tuple[object, ...], compute: Callable[[], T]) -> T:
        """``compute()``, or its result for the same ``inputs`` when this memo holds it."""
        entry = self._entries.get(name)
        if entry is not None:
            held = entry[0]
            if len(held) == len(inputs) and all(map(_same, held, inputs)):
                value: T = entry[1]
                return value
        value = compute()
        self._entries[name] = (inputs, value)
        return value

    def select(self, name: str, objects: tuple[Item, ...], keep: Callable[[Item], bool]
               ) -> tuple[Item, ...]:
        """The ``objects`` for which ``keep`` (a pure function of the object alone) holds, in
        their order. ``keep`` is asked only about objects that were not among the last call's
        (by identity): a pass follows the change of one pod or a few, and asking about every
        pod of the set again was a scan per pass. The last call's objects are held, so their
        identities stay unique. When the very same objects are kept as last time, the last
        call's tuple is returned, so a ``get`` keyed by it (the leaders of a set whose worker
        pod changed) still holds.

        The common case is told apart in C: the same number of objects, most at the same
        place (the cache lists a set's objects in name order, and a new state of a pod keeps
        its name), so only the places whose object is not the last call's are asked about,
        and when none of them is kept, before or now, the last tuple stands without a new
        one. Rebuilding a verdict per identity for every object, every call, was a seventh
        of a pass."""
        held = self._selections.get(name)
        if held is None:
            marks = [bool(keep(o)) for o in objects]
            out = tuple(compress(objects, marks))
            self._selections[name] = (objects, marks, out)
            return out
        before, marks_before, out_before = held
        if before is objects:
            return out_before
        if len(before) == len(objects):
            marks, moved = _judged_in_place(before, marks_before, objects, keep)
            if not moved:
                self._selections[name] = (objects, marks, out_before)
                return out_before
        else:
            marks = _judged_by_identity(before, marks_before, objects, keep)
        out = tuple(compress(objects, marks))
        if len(out_before) == len(out) and all(map(is_, out_before, out)):
            out = out_before  # the same selection: the same tuple, for memos keyed by it
        self._selections[name] = (objects, marks, out)
        return out

    def __len__(self) -> int:
        return len(self._entries) + len(self._selections)


def _judged_in_place(before: tuple[Item, ...], marks_before: list[bool],
                     objects: tuple[Item, ...], keep: Callable[[Item], bool]
                     ) -> tuple[list[bool], bool]:
    """``Memo.select``'s verdicts for ``objects`` where the last call had as many: only the
    places whose object changed are judged. With whether the kept objects differ from the last
    call's (``marks_before`` is returned itself when no verdict changed; it is held)."""
    marks = marks_before  # copied before the first change
    moved = False
    for index in compress(range(len(objects)), map(is_not, before, objects)):
        verdict = bool(keep(objects[index]))
        if verdict or marks_before[index]:
            moved = True
        if verdict != marks_before[index]:
            if marks is marks_before:
                marks = list(marks_before)
            marks[index] = verdict
    return marks, moved


def _judged_by_identity(before: tuple[Item, ...], marks_before: list[bool],
                        objects: tuple[Item, ...], keep: Callable[[Item], bool]) -> list[bool]:
    """``Memo.select``'s verdicts for ``objects``: the last call's for the same objects, the
    others judged."""
    verdicts = dict(zip(map(id, before), marks_before, strict=True))
    marks = [verdicts.get(id(o)) for o in objects]
    with suppress(ValueError):  # the objects not judged before (never None)
        index = marks.index(None)
        while True:
            marks[index] = bool(keep(objects[index]))
            index = marks.index(None, index + 1)
    return marks  # type: ignore[return-value]  # every None judged
