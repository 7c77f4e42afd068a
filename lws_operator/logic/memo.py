"""Results of pure derivations, reused while their inputs are the very same objects.

A pass builds a snapshot before each of its steps (``logic.snapshot``), and most steps derive
the same facts from it again: the leader pods, the leader StatefulSet, the revision key of the
templates, the desired leader StatefulSet. Between two steps, and often between two passes, the
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
from typing import Any, TypeVar

T = TypeVar("T")
_SCALARS = (str, int, float, bool, type(None))


def _same(a: object, b: object) -> bool:
    return a is b or (type(a) in _SCALARS and type(a) is type(b) and a == b)


class Memo:
    """The last result of each named derivation, with its inputs (module docstring)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[object, ...], Any]] = {}

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

    def __len__(self) -> int:
        return len(self._entries)
