"""Lease-based leader election (coordination.k8s.io/v1), the way client-go's elector runs it.

Every replica runs an ``LeaderElector``. A candidate reads the Lease every ``retryPeriod``
(jittered) and takes it once it is free or its holder's renewals have stopped for a whole
``leaseDuration`` (judged by ``logic.runtime.leaderelection``). The leader renews every
``retryPeriod``; each write carries the resourceVersion it read, so of two replicas racing for the
same Lease only one write succeeds (409 for the other). A leader renews with the resourceVersion of
its own last write, without reading first, as client-go's optimistic update does: one request per
renewal; a refused write (someone else wrote the Lease) sends it back to reading and deciding. A
leader that cannot renew for ``renewDeadline`` has lost: ``leading`` is cleared at once and
``on_lost`` runs (``__main__`` ends the process there, as controller-runtime does). ``release()``
hands the lease back on a graceful stop, so a standby takes over within one retry period instead of
a lease duration.

Lease requests use a client without the process's rate limiter: a backlog of reconcile writes
must never delay a renewal past the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry

from lws_operator.kube.client import ApiException, KubeClient, is_status, status_message
from lws_operator.kube.metrics import LeaderElectionMetrics
from lws_operator.logic.runtime import leaderelection as logic
from lws_operator.logic.runtime.leaderelection import LeaseRecord, Observation, Timings

__all__ = ["LeaderElector", "LeadershipLost", "default_identity"]

log = logging.getLogger(__name__)

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class LeadershipLost(RuntimeError):
    """The lease could not be renewed within the renew deadline."""


def default_identity() -> str:
    """``<hostname>_<uuid>``: unique per process, and readable (which pod holds the lease)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderElector:
    def __init__(
        self,
        kube: KubeClient,
        name: str,
        namespace: str,
        *,
        identity: str | None = None,
        timings: Timings | None = None,
        registry: CollectorRegistry | None = None,
        on_lost: Callable[[], Awaitable[None] | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = _utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        timings = timings or Timings()
        timings.validate()
        # Same connection and credentials as ``kube``, no rate limiter, same request metrics.
        self.kube = KubeClient(kube.api, limiter=None, metrics=kube.metrics)
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.timings = timings
        self.on_lost = on_lost
        self.clock = clock
        self.wall = wall
        self.sleep = sleep
        self.leading = asyncio.Event()
        self.observation = Observation(None, clock())
        self._resource_version: str | None = None
        self._last_renewed = 0.0
        self._gauge = (LeaderElectionMetrics.for_registry(registry).status.labels(name)
                       if registry is not None else None)
        if self._gauge is not None:
            self._gauge.set(0)

    @property
    def _collection(self) -> str:
        return LEASES.format(namespace=self.namespace)

    @property
    def _path(self) -> str:
        return f"{self._collection}/{self.name}"

    def _set_leading(self, leading: bool) -> None:
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        if self._gauge is not None:
            self._gauge.set(1 if leading else 0)

    async def _read(self, timeout: float) -> None:  # noqa: ASYNC109
        try:
            lease = await self.kube.request("GET", self._path, timeout=timeout)
        except ApiException as exc:
            if not is_status(exc, 404):
                raise
            lease = None
        self._resource_version = (lease or {}).get("metadata", {}).get("resourceVersion")
        self.observation = self.observation.update(LeaseRecord.from_lease(lease), self.clock())

    async def _write(self, record: LeaseRecord, timeout: float) -> bool:  # noqa: ASYNC109
        """Create or conditionally replace the Lease; False if another replica got there
        first (409)."""
        body = logic.lease_body(self.name, self.namespace, record, self._resource_version)
        try:
            if self._resource_version is None:
                written = await self.kube.request("POST", self._collection, body=body,
                                                  timeout=timeout)
            else:
                written = await self.kube.request("PUT", self._path, body=body, timeout=timeout)
        except ApiException as exc:
            if is_status(exc, 409):
                return False
            raise
        self._resource_version = written.get("metadata", {}).get("resourceVersion")
        self.observation = Observation(record, self.clock())
        return True

    async def try_acquire_or_renew(self, timeout: float = 10.0) -> bool:  # noqa: ASYNC109
        """One attempt: read the Lease, then take or renew it if allowed. True when we hold it
        afterwards. A leader first renews blind, with the resourceVersion of its own last write
        (``logic.may_renew_blind``); only when that write is refused does it read."""
        if self._resource_version is not None and logic.may_renew_blind(
                self.observation, self.identity, self.timings, self.clock()):
            record = logic.acquire_or_renew(self.observation, self.identity, self.timings,
                                            self.clock(), self.wall())
            assert record is not None, "our own record is always renewable"
            try:
                if await self._write(record, timeout):
                    return True
            except ApiException as exc:
                log.info("lease %s/%s: renewal refused (%s %s); reading it", self.namespace,
                         self.name, exc.status, status_message(exc))
        await self._read(timeout)
        record = logic.acquire_or_renew(self.observation, self.identity, self.timings,
                                        self.clock(), self.wall())
        if record is None:
            return False
        return await self._write(record, timeout)

    async def _attempt(self, timeout: float) -> bool:  # noqa: ASYNC109
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(timeout), timeout)
        except Exception as exc:  # any failure is one failed attempt; the deadline decides
            detail = f"{exc.status} {status_message(exc)}" if isinstance(exc, ApiException) \
                else f"{type(exc).__name__}: {exc}"
            log.warning("lease %s/%s: %s", self.namespace, self.name, detail)
            return False

    async def _wait(self, seconds: float, stop: asyncio.Event) -> bool:
        """Sleep ``seconds`` or until ``stop``; True if stopped."""
        if stop.is_set():
            return True
        sleeper = asyncio.ensure_future(self.sleep(seconds))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait([sleeper, stopper], return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            stopper.cancel()
        return stop.is_set()

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign, then lead, until ``stop`` (which does not release: call ``release``).
        Raises ``LeadershipLost`` (after ``on_lost``) if renewals fail past the deadline."""
        log.info("lease %s/%s: %s is a candidate", self.namespace, self.name, self.identity)
        if not await self._campaign(stop):
            return
        self._last_renewed = self.clock()
        self._set_leading(True)
        log.info("lease %s/%s acquired by %s: leading", self.namespace, self.name, self.identity)
        while not await self._wait(self.timings.retry_period, stop):
            if await self._renew(stop):
                return

    async def _campaign(self, stop: asyncio.Event) -> bool:
        """Try for the lease until it is ours (True) or ``stop`` (False)."""
        while not stop.is_set():
            if await self._attempt(self.timings.renew_deadline):
                return not stop.is_set()
            if await self._wait(self._campaign_delay(), stop):
                return False
        return False

    def _campaign_delay(self) -> float:
        """The retry period with client-go's jitter, or less: a candidate looks again right when
        the holder's lease runs out."""
        holder = self.observation.record.holder if self.observation.record else ""
        log.debug("lease %s/%s is held by %s", self.namespace, self.name, holder or "nobody")
        delay = self.timings.retry_period * (1 + random.random() * logic.JITTER_FACTOR)
        expiry = logic.expires_in(self.observation, self.clock())
        if expiry is not None and expiry < delay:
            delay = expiry + 0.05
        return delay

    async def _renew(self, stop: asyncio.Event) -> bool:
        """One renewal, tried again each retry period until it succeeds (False) or ``stop``
        (True). Raises ``LeadershipLost`` (after ``on_lost``) once the renew deadline passed."""
        t = self.timings
        while True:
            remaining = t.renew_deadline - (self.clock() - self._last_renewed)
            if remaining > 0 and await self._attempt(max(0.5, remaining)):
                self._last_renewed = self.clock()
                return False
            if logic.renew_deadline_passed(self._last_renewed, t, self.clock()):
                await self._lose()
                raise LeadershipLost(f"lease {self.namespace}/{self.name} lost")
            if await self._wait(t.retry_period, stop):
                return True

    async def _lose(self) -> None:
        self._set_leading(False)
        log.error("lease %s/%s: not renewed within %ss: leadership lost", self.namespace,
                  self.name, self.timings.renew_deadline)
        if self.on_lost is not None:
            result = self.on_lost()
            if result is not None:
                await result

    async def release(self, timeout: float = 5.0) -> bool:  # noqa: ASYNC109
        """Hand the lease back if we hold it (client-go's ReleaseOnCancel); True if released.
        Call it only once nothing acts as leader any more."""
        was_leading = self.leading.is_set()
        self._set_leading(False)
        if not was_leading:
            return False
        record = self.observation.record
        if record is None or record.holder != self.identity:
            return False
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    if await self._write(logic.release(record, self.wall()), timeout):
                        log.info("lease %s/%s released", self.namespace, self.name)
                        return True
        except ApiException as exc:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name,
                        status_message(exc))
        return False

    def describe(self) -> dict[str, Any]:
        record = self.observation.record
        return {"name": self.name, "namespace": self.namespace, "identity": self.identity,
                "leading": self.leading.is_set(), "holder": record.holder if record else None}
