"""The queue of Events waiting to be written (``kube.event_queue``): per-object order, turns
between objects, the bound and its drop count."""

from __future__ import annotations

import pytest

from lws_operator.kube.event_queue import EventQueue


def drain(queue: EventQueue[str, int]) -> list[tuple[str, int]]:
    """Everything, one item at a time, each done before the next is taken."""
    out = []
    while (taken := queue.take()) is not None:
        out.append(taken)
        queue.done(taken[0])
    return out


def test_one_object_s_items_come_out_in_the_order_they_were_put() -> None:
    queue: EventQueue[str, int] = EventQueue(10)
    for i in range(5):
        assert queue.put("a", i)
    assert drain(queue) == [("a", i) for i in range(5)]
    assert queue.idle


def test_an_object_s_next_item_waits_until_the_one_before_is_done() -> None:
    queue: EventQueue[str, int] = EventQueue(10)
    queue.put("a", 1)
    queue.put("a", 2)
    queue.put("b", 1)
    assert queue.take() == ("a", 1)
    assert queue.take() == ("b", 1)  # another object's item is not held back
    assert queue.take() is None  # a's second waits for its first
    assert (len(queue), queue.in_flight, queue.idle) == (1, 2, False)
    queue.done("a")
    assert queue.has_ready
    assert queue.take() == ("a", 2)
    queue.done("a")
    queue.done("b")
    assert queue.idle


def test_an_item_put_while_its_object_is_being_sent_waits_for_done() -> None:
    queue: EventQueue[str, int] = EventQueue(10)
    queue.put("a", 1)
    assert queue.take() == ("a", 1)
    queue.put("a", 2)
    assert not queue.has_ready
    assert queue.take() is None
    queue.done("a")
    assert queue.take() == ("a", 2)


def test_objects_take_turns() -> None:
    queue: EventQueue[str, int] = EventQueue(10)
    for i in range(3):
        queue.put("busy", i)
    queue.put("quiet", 0)
    assert drain(queue) == [("busy", 0), ("quiet", 0), ("busy", 1), ("busy", 2)]


def test_puts_beyond_the_bound_are_dropped_and_counted() -> None:
    queue: EventQueue[str, int] = EventQueue(3)
    assert [queue.put("a", 0), queue.put("b", 0), queue.put("a", 1)] == [True] * 3
    assert not queue.put("c", 0)
    assert not queue.put("a", 2)
    assert (len(queue), queue.dropped) == (3, 2)
    assert drain(queue) == [("a", 0), ("b", 0), ("a", 1)]  # the first ones are kept


def test_items_being_sent_do_not_count_against_the_bound() -> None:
    queue: EventQueue[str, int] = EventQueue(1)
    queue.put("a", 0)
    assert queue.take() == ("a", 0)
    assert queue.put("a", 1)
    assert not queue.put("b", 0)
    assert queue.dropped == 1


def test_done_for_a_key_not_handed_out_is_an_error() -> None:
    queue: EventQueue[str, int] = EventQueue(2)
    queue.put("a", 0)
    with pytest.raises(KeyError):
        queue.done("a")


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EventQueue(0)
