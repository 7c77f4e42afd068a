"""Waiting for a custom resource's API to be served, instead of failing the start without it.

``kubectl apply -f crds/`` returns once the CustomResourceDefinitions are stored; the API server
serves their kinds a moment later (it establishes the names, then installs the handlers, then
lists them in discovery). An operator started right after (``make run`` does exactly that, and
so does a Helm install whose CRDs and Deployment go in together) would see the kind missing.
A controller does not die of its API not being there yet: it waits, says so in one log line,
and its readiness probe says not ready (``ApiServed.served``) until the API answers.

Discovery (``/apis/<group>/<version>``) says whether the kind is listed; a LIST of one item then
says whether its handler answers (a 404 for a moment after discovery lists it is possible while
the handlers are swapped in). Retries back off up to ``MAX_INTERVAL``, so a CRD that never comes
costs one pair of requests every few seconds, and a CRD applied a moment before is seen within
a fraction of a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from lws_operator.kube.client import ApiException, KubeClient, is_status

log = logging.getLogger(__name__)

FIRST_INTERVAL = 0.1
MAX_INTERVAL = 5.0
# While waiting, the log line is repeated this often (the first one says what to do).
REMIND_EVERY = 60.0


async def discovery_lists(kube: KubeClient, group_version_path: str, *plurals: str) -> bool:
    """Whether discovery lists every one of ``plurals`` under ``group_version_path``
    (``/apis/<group>/<version>``); a 404 or 503 (the group not served, the aggregated discovery
    not ready) is "no". The one discovery check of the operator: start-up checks, optional kinds
    and the wait here."""
    try:
        found = await kube.request("GET", group_version_path)
    except ApiException as exc:
        if is_status(exc, 404, 503):
            return False
        raise
    served = {r.get("name") for r in found.get("resources") or []}
    return all(p in served for p in plurals)


class ApiServed:
    """Whether ``plural.group/version`` is served; :meth:`wait` until it is."""

    def __init__(self, kube: KubeClient, group: str, version: str, plural: str, *,
                 hint: str = "apply crds/") -> None:
        self.kube = kube
        self.group = group
        self.version = version
        self.plural = plural
        self.hint = hint
        # Set once the API answered (never cleared: a CRD deleted later shows in the watches).
        self.served = False

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    async def answers(self) -> bool:
        """One look: listed in discovery and a LIST answers. 404 and 503 (the aggregated
        discovery not ready) and 429 (the storage initializing) mean not yet."""
        try:
            if not await discovery_lists(self.kube, f"/apis/{self.group}/{self.version}",
                                         self.plural):
                return False
            await self.kube.request("GET", f"/apis/{self.group}/{self.version}/{self.plural}",
                                    query={"limit": "1"})
        except ApiException as exc:
            if is_status(exc, 404, 429, 503):
                return False
            raise
        return True

    async def wait(self, stop: asyncio.Event) -> bool:
        """Until the API is served (True) or ``stop`` is set (False)."""
        loop = asyncio.get_running_loop()
        interval = FIRST_INTERVAL
        started = loop.time()
        reminded = None
        while not stop.is_set():
            if await self.answers():
                self.served = True
                if reminded is not None:
                    log.info("the CustomResourceDefinition %s (version %s) is served now, "
                             "after %.1fs", self.name, self.version, loop.time() - started)
                return True
            now = loop.time()
            if reminded is None or now - reminded >= REMIND_EVERY:
                log.warning("waiting for the CustomResourceDefinition %s (version %s) to be "
                            "served (%s); not ready until then", self.name, self.version,
                            self.hint)
                reminded = now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
            interval = min(interval * 2, MAX_INTERVAL)
        return False
