"""Follows the benchmark's pods through one watch and answers "is this phase done, and when did
each set get there?".

Both sides label every pod with its set (``workloads.SET_LABEL``), so the same tracker times the
operator and the baseline. Time is ``time.monotonic()`` throughout; the timeline keeps one point
per change (seconds, Ready pods, Ready pods on the rolled image, pods existing) for the plot.

``firsts`` keeps when the namespace's first StatefulSet, first pod, first scheduled pod and first
Ready pod were seen: the path to the first pod Ready, step by step, so a slow first pod shows
whether the controller or the cluster (controller manager, scheduler, kwok) took the time.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from e2e.bench.workloads import SET_LABEL
from e2e.kube import Kube, is_ready

STALL_SECONDS = 15.0  # no event for this long while a phase waits: list again


@dataclass
class PodState:
    set: str
    ready: bool
    image: str
    deleting: bool


@dataclass
class Tracker:
    kube: Kube
    namespace: str
    pods: dict[str, PodState] = field(default_factory=dict)
    timeline: list[tuple[float, int, int, int]] = field(default_factory=list)
    rolled_image: str = ""
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _task: asyncio.Task[None] | None = None
    _listed: asyncio.Event = field(default_factory=asyncio.Event)
    _last_event: float = 0.0
    resyncs: int = 0
    firsts: dict[str, float] = field(default_factory=dict)
    _first_set: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._follow())
        statefulsets_listed = asyncio.Event()
        self._first_set = asyncio.create_task(self._first_statefulset(statefulsets_listed))
        await asyncio.wait_for(self._listed.wait(), 60)
        await asyncio.wait_for(statefulsets_listed.wait(), 60)

    async def _first_statefulset(self, listed: asyncio.Event) -> None:
        """Note when the namespace's first StatefulSet appears, then stop watching."""
        resource = await self.kube.dyn.resources.get(api_version="apps/v1", kind="StatefulSet")
        existing = await resource.get(namespace=self.namespace)
        listed.set()
        if existing.items:
            return
        async for event in self.kube.dyn.watch(
                resource, namespace=self.namespace,
                resource_version=existing.metadata.resourceVersion, timeout=600):
            if event["type"] == "ADDED":
                self.firsts.setdefault("statefulset_created", time.monotonic())
                return

    async def stop(self) -> None:
        """Cancel the watch and wait for it to end, for at most 10 s (a watch stuck in the
        client must not hold up an interrupted run's cleanup)."""
        if self._first_set is not None:
            self._first_set.cancel()
        await self._stop_following()

    async def _stop_following(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=10)

    async def _follow(self) -> None:
        """List, then watch from the list's version; a watch that ends (server timeout) resumes
        from the last version seen, a failed or expired one (410) lists again."""
        resource = await self.kube.dyn.resources.get(api_version="v1", kind="Pod")
        version: str | None = None
        while True:
            if version is None:
                listed = await resource.get(namespace=self.namespace, label_selector=SET_LABEL)
                self.pods = {}
                for pod in listed.to_dict()["items"]:
                    self._apply("ADDED", pod)
                version = listed.metadata.resourceVersion
                self._last_event = time.monotonic()
                await self._notify()
                self._listed.set()
            try:
                async for event in self.kube.dyn.watch(
                        resource, namespace=self.namespace, label_selector=SET_LABEL,
                        resource_version=version, timeout=240):
                    obj = event["raw_object"]
                    if event["type"] == "ERROR":
                        version = None  # expired: list again
                        break
                    version = obj["metadata"].get("resourceVersion", version)
                    self._last_event = time.monotonic()
                    if event["type"] != "BOOKMARK":
                        self._apply(event["type"], obj)
                        await self._notify()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A dropped stream, or one whose version etcd has compacted away (410, raised
                # rather than sent as an ERROR event): list again. Retrying from the same
                # version would fail forever and leave the phase waiting for its timeout.
                version = None
                await asyncio.sleep(0.5)

    def _apply(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        now = time.monotonic()  # the event's time, for its timeline point and any first
        if kind == "DELETED":
            self.pods.pop(meta["name"], None)
        else:
            spec = pod.get("spec") or {}
            containers = spec.get("containers") or [{}]
            state = PodState(
                set=meta.get("labels", {}).get(SET_LABEL, ""), ready=is_ready(pod),
                image=containers[0].get("image", ""),
                deleting=bool(meta.get("deletionTimestamp")))
            self.pods[meta["name"]] = state
            self.firsts.setdefault("pod_created", now)
            if spec.get("nodeName"):
                self.firsts.setdefault("pod_scheduled", now)
            if state.ready:
                self.firsts.setdefault("pod_ready", now)
        point = (now, self.count(ready=True),
                 self.count(ready=True, image=self.rolled_image), len(self.pods))
        if not self.timeline or self.timeline[-1][1:] != point[1:]:
            self.timeline.append(point)

    async def _resync(self) -> None:
        """Start over from a fresh list. A watch whose consumer fell behind can be closed by
        the API server without the client noticing (seen at 5,000 pods): the phase would then
        wait for its timeout with every pod long done."""
        self.resyncs += 1
        print(f"[bench] no pod event in {STALL_SECONDS:.0f}s while waiting: listing "
              f"{self.namespace} again", file=sys.stderr, flush=True)
        await self._stop_following()  # the first StatefulSet's watch goes on
        self._listed.clear()
        self._last_event = time.monotonic()
        self._task = asyncio.create_task(self._follow())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def count(self, *, ready: bool | None = None, image: str | None = None,
              set_: str | None = None) -> int:
        return sum(1 for p in self.pods.values()
                   if (ready is None or (p.ready and not p.deleting) == ready)
                   and (image is None or p.image == image)
                   and (set_ is None or p.set == set_))

    def complete(self, set_: str, image: str, names: frozenset[str]) -> bool:
        """Set ``set_`` has exactly the pods ``names``, all Ready on ``image``."""
        members = {n: p for n, p in self.pods.items() if p.set == set_}
        return members.keys() == names and all(
            p.ready and not p.deleting and p.image == image for p in members.values())

    async def wait_sets(self, sets: dict[str, frozenset[str]], image: str,
                        timeout: float, started: dict[str, float]) -> dict[str, float]:  # noqa: ASYNC109
        """Wait until every set is complete on ``image``; each set's seconds from its entry in
        ``started`` (filled in by the caller as it submits) to its first complete moment."""
        done: dict[str, float] = {}

        def check() -> bool:
            for name, names in sets.items():
                if name not in done and name in started and self.complete(name, image, names):
                    done[name] = time.monotonic() - started[name]
            return len(done) == len(sets)

        await self._until(check, timeout, lambda: f"{len(done)}/{len(sets)} sets complete, "
                                                   f"{self.count(ready=True)} pods Ready")
        return done

    async def wait_empty(self, timeout: float) -> None:  # noqa: ASYNC109
        await self._until(lambda: not self.pods, timeout,
                          lambda: f"{len(self.pods)} pods left")

    async def _until(self, check: Callable[[], bool], timeout: float,  # noqa: ASYNC109
                     progress: Callable[[], str]) -> None:
        began = time.monotonic()
        deadline = began + timeout
        async with self._changed:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"not done after {timeout:.0f}s: {progress()}")
                # Quiet before the wait began is no stall: the rollout follows a steady window
                # of two minutes without a pod event, and listing every pod again at its start
                # charged the operator's rollout with a relisting the baseline's never had.
                if time.monotonic() - max(self._last_event, began) > STALL_SECONDS:
                    await self._resync()
                with contextlib.suppress(TimeoutError):
                    # Also wake periodically: `started` fills in while we wait.
                    await asyncio.wait_for(self._changed.wait(), min(left, 1.0))
