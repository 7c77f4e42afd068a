"""What the admission runtime tells the controllers of the pod webhook (``WebhookRuntime.
pod_webhook``, ``follow_pod_webhook``): the live configuration's entry once registered and
answering, judged by ``logic.mutation.scope`` to serve the confined namespace and no other, and
None once the listener stops answering (nothing is recreated then)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from e2e.cluster import LocalCluster
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.kube import wait_for
from lws_operator.api.constants import MUTATE_POD_PATH, NAME_LABEL, WORKER_INDEX_LABEL
from lws_operator.logic.mutation.scope import pod_scope

pytestmark = pytest.mark.api

LEADER = {NAME_LABEL: "a", WORKER_INDEX_LABEL: "0"}


async def test_the_pod_webhook_view_follows_registration_and_listener(
        cluster: LocalCluster, namespace: str) -> None:
    seen: list[dict[str, Any] | None] = []
    hooks = await start_webhooks(str(cluster.kubeconfig), options_for(namespace))
    hooks.runtime.add_pod_webhook_listener(seen.append)
    follow = asyncio.create_task(hooks.runtime.follow_pod_webhook(hooks.stop, interval=0.1))
    try:
        async def told() -> dict[str, Any] | None:
            return seen[-1] if seen else None

        hook = await wait_for(told, timeout=30, what="the listener told of the pod webhook")
        assert hook is not None
        assert hook["name"] == "mpod.kb.io"
        assert hook["clientConfig"]["url"].endswith(MUTATE_POD_PATH)
        assert pod_scope(hook, namespace, LEADER).serves
        assert not pod_scope(hook, f"{namespace}-other", LEADER).serves
        assert len(seen) == 1  # told once, not on every look

        await hooks.runtime.server.stop()  # the listener dies; the registration stays

        async def gone() -> bool:
            return bool(seen) and seen[-1] is None

        await wait_for(gone, timeout=30, what="the listener told the webhook does not serve")
        assert hooks.runtime.pod_webhook() is None
    finally:
        await stop_webhooks(hooks)
        await asyncio.wait_for(follow, 10)
