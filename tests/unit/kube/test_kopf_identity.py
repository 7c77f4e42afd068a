"""kopf is given the operator's own identity (``kube.signal_watch.kopf_identity``): left to
itself it asks ``getpass.getuser()``, which raises ``KeyError`` for the image's user 65532 (no
passwd entry, no ``USER`` in a pod's environment), and the operator crashed at start in its
pod."""

from __future__ import annotations

import getpass
import threading
from typing import Any

import kopf
import pytest
from kopf._core.reactor import running

from lws_operator.kube.signal_watch import kopf_identity, watch


def _no_user() -> str:
    raise KeyError("getpwuid(): uid not found: 65532")


@pytest.fixture
def passwdless(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process as the image's user in a pod: no passwd entry, no user in the env."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME", "POD_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(getpass, "getuser", _no_user)


def test_the_identity_names_the_pod_or_the_host(monkeypatch: pytest.MonkeyPatch,
                                                passwdless: None) -> None:
    assert kopf_identity().startswith("lws-operator@")
    monkeypatch.setenv("POD_NAME", "lws-controller-manager-7d9f-abcde")
    assert kopf_identity() == "lws-operator@lws-controller-manager-7d9f-abcde"


def test_kopf_alone_fails_without_a_passwd_entry(passwdless: None) -> None:
    """What the operator avoids: kopf's own detection, used when no identity is given."""
    from kopf._core.engines import peering

    with pytest.raises(KeyError):
        peering.detect_own_id(manual=False)


class _Spawned(Exception):
    pass


def test_the_kopf_thread_gives_kopf_its_identity(monkeypatch: pytest.MonkeyPatch,
                                                 passwdless: None) -> None:
    """``signal_watch.watch`` (kopf's thread) runs the real ``kopf.operator`` up to its
    ``spawn_tasks``, where kopf detects an identity unless given one; the tasks are not spawned
    (they would need a cluster)."""
    seen: dict[str, Any] = {}

    async def spawn_tasks(**kwargs: Any) -> Any:
        seen.update(kwargs)
        raise _Spawned

    monkeypatch.setattr(running, "spawn_tasks", spawn_tasks)
    with pytest.raises(_Spawned):
        watch(kopf.OperatorRegistry(), kopf.OperatorSettings(), threading.Event())
    assert str(seen["identity"]).startswith("lws-operator@")
