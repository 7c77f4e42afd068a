"""``kubectl lws rollout status NAME``: wait for a set's rollout and say how it goes, as
``kubectl rollout status`` does for a Deployment, with exit codes a CI pipeline can gate on.

The shell half: read the set, judge it (``plugin.analysis.rollout_status``), print the judgement
whenever it changes, and judge it again at each change a watch of that one object brings (a
field selector on its name, from the resourceVersion read), never polling. A watch the server
ends (its timeout) or expires (410 Gone) is followed by a fresh read and a new watch. Each
judgement reads afresh what it needs beside the set: the leader StatefulSet or Deployment of a
LeaderWorkerSet (its step), the child LeaderWorkerSets and role scalers of a DisaggregatedSet
(each slice's step of the coordinated rollout). A LeaderWorkerSet's leader workload is watched
too, since its partition moves group by group while the set's counters are written in batches;
so are a DisaggregatedSet's children, scaled at each step of the coordinated rollout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import sys
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api.disaggregated import NAME_LABEL as DS_NAME_LABEL
from lws_operator.api.disaggregated import DisaggregatedSetView
from lws_operator.api.view import lws_view
from lws_operator.flags import boolean, duration
from lws_operator.kube.client import KubeClient, loads, status_message
from lws_operator.plugin.analysis.rollout_status import (
    COMPLETE,
    FAILED,
    Verdict,
    lws_verdict,
    rolled_back_from,
)
from lws_operator.plugin.disaggregated import children_path, read_scene
from lws_operator.plugin.rollout.target import Ambiguous, NotFound, Target, resolve

if TYPE_CHECKING:
    from lws_operator.plugin.cli import Session

EXIT_COMPLETE, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_DEADLINE, EXIT_TIMEOUT, EXIT_NOT_FINISHED = 3, 4, 5
WATCH_SECONDS = 300  # the server ends each watch after this; a new one follows

DESCRIPTION = """\
Wait until the rollout of a LeaderWorkerSet or DisaggregatedSet completes, printing its
progress whenever it changes: for a LeaderWorkerSet the groups updated and ready of the total
and the leader StatefulSet's partition (Hash group identity: the leader Deployment's updated
groups); for a DisaggregatedSet each role's groups and each slice's step of the coordinated
rollout (old|new groups per role, from the controller's own planner).

The rollout is complete when the set is Available at its latest generation. It fails when it
passes its progress deadline (lws-operator.dev/progress-deadline-seconds: Progressing=False,
ProgressDeadlineExceeded), or when the operator rolls it back on that deadline while this
command waits. A paused rollout (lws-operator.dev/paused: "true") is said to be paused, and the
command keeps waiting, as kubectl does for a paused Deployment.

The set is watched, not polled: a line is printed when it changes."""
EPILOG = """\
exit codes:
  0  the rollout is complete
  1  the set does not exist (or was deleted meanwhile), the API refused a read, the API
     server could not be reached or the kubeconfig could not be loaded
  2  bad command line, or NAME names both kinds (pass --kind)
  3  the rollout failed: it passed its progress deadline (ProgressDeadlineExceeded), or the
     operator rolled it back on that deadline
  4  --timeout passed before the rollout completed
  5  --watch=false only: the rollout is not finished yet
  130  interrupted (Ctrl-C)

examples:
  kubectl lws rollout status my-llm                        wait, however long it takes
  kubectl lws rollout status my-llm --timeout=10m          give up after ten minutes (exit 4)
  kubectl lws rollout status my-llm --watch=false          the state now, then exit
  kubectl lws rollout status my-disagg --kind disaggregatedset"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status", help="wait for a rollout to complete, printing its progress",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", metavar="NAME", help="the LeaderWorkerSet or DisaggregatedSet")
    parser.add_argument("--timeout", type=duration, default=dt.timedelta(0), metavar="D",
                        help="the longest wait, e.g. 30s, 5m, 1h (default 0: no limit)")
    parser.add_argument("--watch", type=boolean, default=True, metavar="BOOL",
                        help="wait for the rollout to finish (default true); --watch=false "
                        "prints the state once")
    parser.set_defaults(run=run, api_error_exit=EXIT_ERROR)


# ------------------------------------------------------------------------------ judging


def leader_workload_path(lws: Mapping[str, Any]) -> str:
    """A LeaderWorkerSet's leader StatefulSet (Ordinal) or Deployment (Hash), named after it."""
    view = lws_view(lws)
    kind = "deployments" if view.hashed else "statefulsets"
    return f"/apis/apps/v1/namespaces/{view.namespace}/{kind}/{quote(view.name)}"


async def judge_lws(kube: KubeClient, lws: Mapping[str, Any],
                    rolled_back_before: str | None) -> Verdict:
    workload = await kube.get(leader_workload_path(lws))
    return lws_verdict(lws, workload, rolled_back_before)


async def judge_ds(kube: KubeClient, ds: Mapping[str, Any]) -> Verdict:
    """The set with its owned children and role scalers, at the target revision as the
    controller decides it."""
    return (await read_scene(kube, ds)).verdict()


class Judge:
    """Judges one set from a fresh body of it; remembers what a LeaderWorkerSet's rollback
    annotation said when the command began (a change of it is a rollback seen)."""

    def __init__(self, kube: KubeClient, target: Target) -> None:
        self.kube = kube
        self.kind = target.kind
        self.rolled_back_before = rolled_back_from(target.body)

    async def __call__(self, body: Mapping[str, Any]) -> Verdict:
        if self.kind == "leaderworkerset":
            return await judge_lws(self.kube, body, self.rolled_back_before)
        return await judge_ds(self.kube, body)

    def companions(self, body: Mapping[str, Any]) -> list[Watch]:
        """What beside the set moves the judgement on, watched with it. A LeaderWorkerSet's
        leader workload: its partition moves group by group while the set's own counters are
        written in batches (``logic.status.pacing``). A DisaggregatedSet's children: each
        step of the coordinated rollout scales them, while the set's status sums their
        counters, batched likewise."""
        if self.kind == "leaderworkerset":
            return [Watch.named(leader_workload_path(body))]
        view = DisaggregatedSetView.of(body)
        return [Watch(children_path(view.namespace),
                      ("labelSelector", f"{DS_NAME_LABEL}={view.name}"))]


# ------------------------------------------------------------------------------ waiting


class Deleted(LookupError):
    """The set was deleted while watched."""


class Printer:
    """Prints a verdict when it differs from the last one printed (kubectl prints each new
    status line once)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.last: Verdict | None = None

    def __call__(self, verdict: Verdict) -> None:
        if verdict == self.last:
            return
        self.last = verdict
        print(verdict.message, file=self.out)
        for line in verdict.details:
            print(f"  {line}", file=self.out)
        self.out.flush()


@dataclass(frozen=True)
class Watch:
    """One watch: a collection and the selector that narrows it."""

    collection: str
    selector: tuple[str, str]  # ("fieldSelector", ...) or ("labelSelector", ...)

    @classmethod
    def named(cls, path: str) -> Watch:
        """The watch of the one object at ``path``."""
        collection, name = path.rsplit("/", 1)
        return cls(collection, ("fieldSelector", f"metadata.name={name}"))


Item = dict[str, Any] | BaseException | None  # a change, how a watch failed, or its end


class Follower:
    """The watches of one ``follow``: the set's own and its companions'
    (``Judge.companions``), each a task putting what it sees on one queue."""

    def __init__(self, kube: KubeClient, target: Target) -> None:
        self.kube = kube
        self.target = target
        self.own = Watch.named(target.path)
        self.queue: asyncio.Queue[tuple[Watch, Item]] = asyncio.Queue()
        self.pumps: dict[Watch, asyncio.Task[None]] = {}

    def start(self, watch: Watch, version: str) -> None:
        self.pumps[watch] = asyncio.create_task(
            _pump(self.kube, watch, version, watch == self.own, self.queue))

    async def stop(self) -> None:
        for task in self.pumps.values():
            task.cancel()
        await asyncio.gather(*self.pumps.values(), return_exceptions=True)

    async def next_body(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The set as it is after the next change of it or of a companion. The set's watch is
        renewed from a fresh read when the server ends it (``Deleted`` when the set is gone);
        a companion's from now when it ends (its first events are its state), never when it
        failed (forbidden, say): the set's own changes still move the judgement on."""
        watch, item = await self.queue.get()
        if watch != self.own:
            if item is None:
                self.start(watch, "")
            return body
        if isinstance(item, BaseException):
            raise item
        if item is None:
            fresh = await self.kube.get(self.target.path)
            if fresh is None:
                raise Deleted(f"{self.target.kind} {self.target.path.rsplit('/', 1)[1]} was "
                              "deleted")
            self.start(watch, _version(fresh))
            return fresh
        return item


async def follow(kube: KubeClient, target: Target, judge: Judge, show: Printer) -> Verdict:
    """Watch the set, and its companions, until its verdict is final; that verdict. Raises
    ``Deleted``. Every change of either is judged with the set as last seen."""
    body: Mapping[str, Any] = target.body
    verdict = await judge(body)
    show(verdict)
    follower = Follower(kube, target)
    follower.start(follower.own, _version(body))
    for watch in judge.companions(body):
        follower.start(watch, "")
    try:
        while not verdict.finished:
            body = await follower.next_body(body)
            verdict = await judge(body)
            show(verdict)
    finally:
        await follower.stop()
    return verdict


def _version(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion") or "")


async def _pump(kube: KubeClient, watch: Watch, version: str, own: bool,
                queue: asyncio.Queue[tuple[Watch, Item]]) -> None:
    """Put each change ``watch`` sees on ``queue``, then None when it ends, or the exception
    it failed with (``own``: the set's, whose deletion is ``Deleted``)."""
    try:
        async with contextlib.aclosing(_changes(kube, watch, version, own)) as changes:
            async for body in changes:
                await queue.put((watch, body))
    except Exception as exc:  # handed to follow, which raises the set's own
        await queue.put((watch, exc))
        return
    await queue.put((watch, None))


async def _changes(kube: KubeClient, watch: Watch, version: str,
                   own: bool) -> AsyncGenerator[dict[str, Any]]:
    """Each object ``watch`` sees change, from ``version`` on (empty: from now, its current
    objects first), until the server ends the watch or the version expires (410 Gone).
    ``own``: the set's watch, where a deletion raises ``Deleted``."""
    query = {"watch": "true", watch.selector[0]: watch.selector[1],
             "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_SECONDS)}
    if version:
        query["resourceVersion"] = version
    async with kube.stream(watch.collection, query=query) as lines:
        async for line in lines:
            if not line.strip():
                continue
            event = loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":  # 410 Gone: the version is too old
                return
            if kind == "DELETED" and own:
                raise Deleted(f"{watch.collection.rsplit('/', 1)[1]} "
                              f"{watch.selector[1].split('=', 1)[1]} was deleted")
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                yield dict(obj)


async def run(session: Session, args: argparse.Namespace) -> int:
    return await rollout_status(session.kube, session.namespace, args.name, args.kind,
                                args.timeout, args.watch, sys.stdout, sys.stderr)


async def _target(kube: KubeClient, namespace: str, name: str, kind: Any,
                  err: TextIO) -> Target | int:
    """The set NAME names, or the exit code of why there is none (said on ``err``)."""
    try:
        return await resolve(kube, namespace, name, kind)
    except NotFound as exc:
        print(f"error: {exc}", file=err)
        return EXIT_ERROR
    except Ambiguous as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    except ApiException as exc:
        print(f"error: reading {name}: {status_message(exc)}", file=err)
        return EXIT_ERROR


async def rollout_status(kube: KubeClient, namespace: str, name: str, kind: Any,
                         limit: dt.timedelta, watch: bool, out: TextIO, err: TextIO) -> int:
    """The whole command; its exit code (the module's ``EXIT_*``). ``limit``: the longest wait
    (0: none)."""
    target = await _target(kube, namespace, name, kind, err)
    if isinstance(target, int):
        return target
    judge, show = Judge(kube, target), Printer(out)
    deadline = asyncio.timeout(limit.total_seconds() or None)
    try:
        if not watch:
            verdict = await judge(target.body)
            show(verdict)
        else:
            async with deadline:
                verdict = await follow(kube, target, judge, show)
    except TimeoutError:
        if not deadline.expired():  # a request's own timeout: the API server is away
            raise
        print(f"error: timed out after {limit.total_seconds():g}s waiting for the rollout "
              f"of {name}", file=err)
        return EXIT_TIMEOUT
    except (Deleted, ApiException) as exc:
        text = status_message(exc) if isinstance(exc, ApiException) else str(exc)
        print(f"error: {text}", file=err)
        return EXIT_ERROR
    return {COMPLETE: EXIT_COMPLETE, FAILED: EXIT_DEADLINE}.get(verdict.state,
                                                                EXIT_NOT_FINISHED)
