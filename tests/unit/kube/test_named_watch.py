"""``NamedObject.store``: which copy of the watched object wins, and who is told."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.kube.named_watch import NamedObject


def obj(version: str, data: str = "x") -> dict[str, Any]:
    return {"metadata": {"name": "cert", "resourceVersion": version}, "data": data}


@pytest.mark.parametrize(("stored", "incoming", "deleted", "kept", "told"), [
    (None, obj("5"), False, obj("5"), True),  # first sight
    (obj("5"), obj("7", "y"), False, obj("7", "y"), True),  # newer
    (obj("7", "y"), obj("5"), False, obj("7", "y"), False),  # an echo older than our write
    (obj("5"), obj("5"), False, obj("5"), False),  # the same again
    (obj("5"), obj("9"), True, None, True),  # deleted
    (obj("9"), obj("5"), True, obj("9"), False),  # a deletion older than what we hold
    (None, None, True, None, False),  # absent, still absent
])
def test_store(stored: dict[str, Any] | None, incoming: dict[str, Any] | None, deleted: bool,
               kept: dict[str, Any] | None, told: bool) -> None:
    calls: list[None] = []
    watched = NamedObject(None, "/api/v1/namespaces/ns/secrets", "cert",  # type: ignore[arg-type]
                          lambda: calls.append(None))
    watched.obj = stored
    watched.store(incoming, deleted=deleted)
    assert watched.obj == kept
    assert bool(calls) == told


def test_our_own_write_is_kept_without_waking_anyone() -> None:
    calls: list[None] = []
    watched = NamedObject(None, "/c", "cert", lambda: calls.append(None))  # type: ignore[arg-type]
    watched.store(obj("3", "ours"), notify=False)
    assert watched.obj == obj("3", "ours")
    assert calls == []
