"""The queue of Events waiting to be written: bounded, one lane per object, no I/O.

The ``EventRecorder`` (``kube.events``) puts an Event here and returns, so a reconcile pass
never waits for an Event write; a few senders take Events from here and write them. Its policy,
kept apart from the sending so it is tested without a cluster or an event loop:

- per-object order: Events regarding one object are handed out in the order they were put, and
  never two at once (the next waits until the sender of the one before says ``done``), so a
  set's Events are written in the order its passes decided them, however many senders run;
- fairness: objects with Events waiting take turns, so one busy set's burst does not hold back
  another's Events;
- a bound on the Events waiting (not counting those being written): a put beyond it is dropped
  and counted, as client-go's event broadcaster drops what its full queue (1,000) cannot take.
  Recording is best effort, and a stuck API server must not grow the operator's memory.

It lives on one event loop and is not thread-safe.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["EventQueue"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class EventQueue(Generic[K, T]):
    """Items in one FIFO lane per key, at most ``bound`` waiting in all."""

    def __init__(self, bound: int) -> None:
        if bound < 1:
            raise ValueError("the bound must be at least 1")
        self.bound = bound
        self.dropped = 0  # puts refused because ``bound`` items were waiting
        self._lanes: dict[K, deque[T]] = {}
        # Keys whose lane has items and none of whose items is being sent, in turn order.
        self._ready: deque[K] = deque()
        self._busy: set[K] = set()
        self._waiting = 0

    def __len__(self) -> int:
        """Items waiting (not those handed out and not yet ``done``)."""
        return self._waiting

    @property
    def in_flight(self) -> int:
        """Items handed out and not yet ``done``."""
        return len(self._busy)

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing being sent."""
        return not self._waiting and not self._busy

    @property
    def has_ready(self) -> bool:
        """Whether ``take`` would hand something out now."""
        return bool(self._ready)

    def put(self, key: K, item: T) -> bool:
        """Queue ``item`` in ``key``'s lane; False (and counted in ``dropped``) when full."""
        if self._waiting >= self.bound:
            self.dropped += 1
            return False
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = deque()
        if not lane and key not in self._busy:
            self._ready.append(key)
        lane.append(item)
        self._waiting += 1
        return True

    def take(self) -> tuple[K, T] | None:
        """The oldest item of the next key in turn whose previous item is done; None when no
        key has one."""
        if not self._ready:
            return None
        key = self._ready.popleft()
        item = self._lanes[key].popleft()
        self._waiting -= 1
        self._busy.add(key)
        return key, item

    def done(self, key: K) -> None:
        """The item ``take`` handed out for ``key`` was sent (or given up): its lane's next
        item may be handed out. A key not handed out is an error (``KeyError``)."""
        self._busy.remove(key)
        lane = self._lanes.get(key)
        if lane:
            self._ready.append(key)
        else:
            self._lanes.pop(key, None)
