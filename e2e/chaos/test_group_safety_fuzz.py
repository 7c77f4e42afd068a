"""Group safety fuzzed: node drains, template changes and scaling interleaved at random with
operator kills; the group disruption budget and the progress deadline must hold throughout, and
everything must converge with nothing lost.

Two ``lws-operator run`` replicas (leader election on, a 6 s lease as in the leader failover run)
manage three LeaderWorkerSets of 2-pod groups on five kwok nodes of the test's own:

* ``budget``: ``max-disrupted-groups: "1"``, 4 groups (scaled between 3 and 5), rolled to new
  good images.
* ``deadline``: ``max-disrupted-groups: "50%"`` (2 of its 4 groups),
  ``progress-deadline-seconds: "10"``, maxUnavailable 1 and maxSurge 1; rolled to good images,
  and now and then to one that never becomes Ready (kwok withholds readiness for an hour),
  fixed by a later good one.
* ``rollback``: ``max-disrupted-groups: "1"`` of 3 groups, ``progress-deadline-seconds: "10"``,
  ``rollback-on-deadline: "true"``, maxUnavailable 1 and maxSurge 1; rolled to good images,
  and now and then to a never-Ready one, sometimes to a second never-Ready one on top (so a
  revision that never was fully Ready is alive beside the last good one), or fixed by hand
  before the operator rolls it back. A bad template the test does not fix must be rolled back
  by the operator.

Each step, chosen at random from a printed, settable seed (``LWS_FUZZ_SEED``): start a
``kubectl drain`` of a node (in the background: it waits on the budget's 429s and retries every
5 s; at most two nodes cordoned), uncordon one, roll a set, scale ``budget``, make ``deadline``
bad or fix it, make ``rollback`` bad (again) or fix it, or SIGKILL the leader, the standby or
both (restarted after a random pause; a leader must be elected again). Then a random pause of
up to 3 s.

How the webhook is reached. The operator replicas serve their webhooks in Service mode; the
test namespace's admission is the test process's own (``e2e.harness.replicas``), and its
eviction path forwards each review, unchanged, to the oldest serving replica's webhook port,
where the replica's admission child hands it to its main process's guard, as the chart's
Service would route it. No replica serving (both killed, or restarting) answers as the API
server's ``failurePolicy: Ignore`` would: allowed.

What counts against the budget. Groups go down for many fair reasons here: a rollout's own
group restarts (maxUnavailable), a scale-up's new groups, a bad template's groups, and evictions
that nothing guarded (no replica serving, or one whose caches have not synced yet, which allows
as if down). The budget promises something narrower: it allows the eviction of a pod of a
*healthy* group only while fewer than the budget of groups are disrupted. So the run counts, per
set, the groups taken down by an eviction the guard allowed of a healthy group: the guard's own
decision log line (its "disrupted" list at that moment) says the group was healthy, and the
group stays counted until the test's pod watch shows the evicted pod gone and the group whole
and Ready again (or the group scaled away). Evictions of already-disrupted groups (free by the
rule) and unguarded ones are recorded and reported, never counted. At every sampled moment
(every watch event, and every 150 ms) the count must be at most the budget. Before a new group
is counted, the others' ends are judged on a fresh list from the API server, so a test watch a
few milliseconds behind the operator's cannot make a recovered group look still down.

The deadline. From the moment the test sees ``Progressing=False/ProgressDeadlineExceeded`` on a
bad template until its next template change, the leader StatefulSet's partition and replicas
must stay exactly as first seen (sampled every 0.5 s, across operator kills).

The rollback. The test notes every revision it sees fully Ready (every group of the set whole
and Ready on that revision, from its pod watch). Every rollback (a new value of the set's
``rolled-back-from`` annotation, polled while the test has it on a bad template) is then
checked: the template restored is one the test rolled to as good, each bad revision is rolled
back from at most once, and at the end the ``RolledBack`` Events match the rollbacks seen one
for one, each naming a revision the test saw fully Ready as its target.

At the end: the drains still running are awaited, ``deadline`` is fixed if bad, ``rollback``'s
bad template is left for the operator to roll back (it must, within 100 s), both replicas
run, every cordoned node is drained again (the drain must complete) and uncordoned, and every
set converges: all groups Ready on one revision with the last image, replicas as last set, the
status counters right, exactly the expected pods and StatefulSets in the namespace (nothing lost,
orphaned or duplicated), at most one leader at any probe, and no operator error log line.

Sizes: ``size(12, 200)`` steps. Short: 50-76 s measured (create, 12 steps, the final drains
and convergence), 63 s with the rollback set (3 stacked bad templates, 1 rollback); full: 332 s
measured before the rollback set was added (20 kills, 28 drains, 121 evictions refused), not
yet measured with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from e2e.chaos import size
from e2e.cluster.nodes import HOSTNAME_LABEL, NodeLayout, node_manifests
from e2e.harness.builder import API, KIND, LeaderWorkerSet
from e2e.harness.converge import READY_DELAY, wait_converged
from e2e.harness.launcher import OperatorProcess
from e2e.harness.pod_view import PodView
from e2e.harness.replicas import Env
from e2e.kube import MERGE_PATCH, condition, is_ready, polling, wait_for
from lws_operator.admission.review import allowed
from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    NAME_LABEL,
    TEMPLATE_REVISION_HASH_LABEL,
    VALIDATE_EVICTION_PATH,
)
from lws_operator.logic.disruption.budget import RESERVATION_SECONDS

pytestmark = [pytest.mark.full, pytest.mark.chaos_run, pytest.mark.replicas(suffix="fz")]

STEPS = size(12, 200)
SIZE = 2
NODES = 5
MAX_CORDONED = 2
DEADLINE_SECONDS = 10
OURS = "lws-operator.dev/"
POOL = "e2e.lws-operator.dev/fuzz-pool"
TIMINGS = ("--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s",
           "--leader-elect-retry-period", "1s")
BUDGETS = {"budget": 1, "deadline": 2, "rollback": 1}  # "1", "50%" of deadline's 4 groups
ROLLED_BACK_FROM = OURS + "rolled-back-from"
ROLLED_BACK = re.compile(r"^Rolled back from revision (?P<bad>\S+) to revision (?P<to>\S+) ")
DECISION = re.compile(r"eviction of pod (?P<ns>[^/]+)/(?P<pod>\S+) \(group (?P<group>\S+) of "
                      r"(?P<set>\S+)\): (?P<verdict>allowed|refused); budget (?P<budget>\d+), "
                      r"disrupted (?P<disrupted>.*)$")


def template(image: str, ready: bool, pool: str) -> dict[str, Any]:
    """The worker (and so leader) template: Ready 1 s after start, or (``ready`` False) not for
    an hour."""
    return {"metadata": {"annotations": {READY_DELAY: "1s" if ready else "1h"}},
            "spec": {"containers": [{"name": "engine", "image": image}],
                     "nodeSelector": {POOL: pool}}}


@dataclass
class SetState:
    """What the test last asked of one set."""

    name: str
    replicas: int
    image: str
    serial: int = 1
    bad_since: float | None = None  # deadline: on a never-Ready template since (monotonic)
    epoch: int = 0  # template changes so far (the deadline hold resets on each)
    held: tuple[int, int] | None = None  # (partition, replicas) at ProgressDeadlineExceeded
    exceeded: int = 0  # bad templates the test saw reach ProgressDeadlineExceeded
    good: set[str] = field(default_factory=set)  # images the test rolled to as good
    fully_ready: set[str] = field(default_factory=set)  # revisions seen with every group Ready
    rolled_back_from: str | None = None  # the set's annotation as last seen
    rollbacks: list[tuple[str, str]] = field(default_factory=list)  # (bad revision, image)
    bad_rolls: int = 0
    fixed_by_hand: int = 0
    raced: int = 0  # template changes made while the operator might be rolling back
    last: str = ""  # the image the test last patched in


@dataclass
class Period:
    """A group taken down by a guarded eviction of a pod of it while it was healthy."""

    set_name: str
    group: str
    pod: str
    uid: str | None
    started: float


@dataclass
class Ledger:
    """Every eviction review the namespace's webhook saw, and the budget's count over time."""

    decisions: dict[str, int] = field(default_factory=dict)  # outcome -> count
    periods: list[Period] = field(default_factory=list)  # open ones
    closed: int = 0
    worst: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    samples: int = 0

    def note(self, outcome: str) -> None:
        self.decisions[outcome] = self.decisions.get(outcome, 0) + 1


class Decisions:
    """The guard's decision log lines of one replica, read as the log grows."""

    def __init__(self, op: OperatorProcess) -> None:
        self.op = op
        self.offset = 0
        self.by_pod: dict[str, list[dict[str, str]]] = {}

    def refresh(self) -> None:
        try:
            with self.op.log_path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        for line in chunk[:end].decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                match = DECISION.match(str(entry.get("msg", ""))) if isinstance(
                    entry, dict) else None
                if match:
                    got = match.groupdict()
                    self.by_pod.setdefault(f"{got['ns']}/{got['pod']}", []).append(got)

    def count(self, key: str) -> int:
        self.refresh()
        return len(self.by_pod.get(key, []))

    def after(self, key: str, seen: int) -> list[dict[str, str]]:
        self.refresh()
        return self.by_pod.get(key, [])[seen:]


def whole_and_ready(pods: Mapping[str, dict[str, Any]], set_name: str, group: str) -> bool:
    members = [p for p in pods.values()
               if p["metadata"].get("labels", {}).get(NAME_LABEL) == set_name
               and p["metadata"]["labels"].get(GROUP_INDEX_LABEL) == group
               and not p["metadata"].get("deletionTimestamp")]
    return len(members) == SIZE and all(is_ready(p) for p in members)


def fully_ready_on(pods: Mapping[str, dict[str, Any]], set_name: str,
                   replicas: int) -> str | None:
    """The revision every group of the set is whole and Ready on, if there is one."""
    keys = {p["metadata"]["labels"].get(TEMPLATE_REVISION_HASH_LABEL) for p in pods.values()
            if p["metadata"].get("labels", {}).get(NAME_LABEL) == set_name
            and not p["metadata"].get("deletionTimestamp")
            and int(p["metadata"]["labels"].get(GROUP_INDEX_LABEL, "-1")) < replicas}
    if len(keys) != 1 or not all(whole_and_ready(pods, set_name, str(g))
                                 for g in range(replicas)):
        return None
    key = next(iter(keys))
    return key if isinstance(key, str) else None


def down_groups(pods: Mapping[str, dict[str, Any]], set_name: str, replicas: int) -> list[str]:
    return [str(g) for g in range(replicas) if not whole_and_ready(pods, set_name, str(g))]


class Fuzz:
    """The run: operators, sets, nodes, drains, and the invariants' bookkeeping."""

    def __init__(self, env: Env, seed: int) -> None:
        self.env = env
        self.kube, self.ns = env.kube, env.namespace
        self.rng = random.Random(seed)
        self.nodes = [f"fz-{self.ns}-{i}" for i in range(NODES)]
        self.cordoned: set[str] = set()
        self.drains: dict[str, asyncio.Task[tuple[int, str]]] = {}
        self.drain_results: list[tuple[str, int, int]] = []  # node, exit code, 429s seen
        self.sets = {"budget": SetState("budget", 4, "engine:b1", good={"engine:b1"}),
                     "deadline": SetState("deadline", 4, "engine:d1", good={"engine:d1"}),
                     "rollback": SetState("rollback", 3, "engine:r1", good={"engine:r1"})}
        self.rollback_violations: list[str] = []
        self.serving: list[OperatorProcess] = []
        self.decisions: dict[int, Decisions] = {}
        self.restarting: asyncio.Task[None] | None = None
        self.started = 0
        self.kills: dict[str, int] = {}
        self.takeovers: list[float] = []
        self.two_leaders: list[str] = []
        self.ledger = Ledger()
        self.view = PodView(self.kube, self.ns, on_event=self.judge)
        self.hold_violations: list[str] = []
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False  # the replica's certificate names its Service
        self.ctx.verify_mode = ssl.CERT_NONE

    # --------------------------------------------------------------------------- operators

    async def start_operator(self) -> OperatorProcess:
        self.started += 1
        op = self.env.operator(f"fz-{self.started}", *TIMINGS, "--workers", "4")
        await op.start()
        self.decisions[id(op)] = Decisions(op)
        self.serving.append(op)
        return op

    async def leader(self, timeout: float = 60) -> OperatorProcess:  # noqa: ASYNC109
        async def probe() -> OperatorProcess | None:
            leading = [op for op in self.serving if op.alive and await op.leading()]
            if len(leading) > 1:
                self.two_leaders.append(", ".join(op.name for op in leading))
            return leading[0] if len(leading) == 1 else None

        got = await wait_for(probe, timeout=timeout, interval=0.2, what="a leader")
        assert got is not None
        return got

    async def kill(self) -> str:
        """SIGKILL the leader, the standby or both; restart to two replicas after a pause."""
        if self.restarting is not None:
            self.restarting.result()  # a restart that failed (no leader elected) fails here
        which = self.rng.choices(["leader", "standby", "both"], [3, 1, 1])[0]
        leading = [op for op in self.serving if await op.leading()]
        if which == "both":
            victims = list(self.serving)
        elif which == "leader":
            victims = leading[:1] or self.serving[:1]
        else:
            victims = [op for op in self.serving if op not in leading][:1]
        for op in victims:
            self.serving.remove(op)
            await op.kill()
        self.kills[which] = self.kills.get(which, 0) + 1
        killed_at = time.monotonic()
        pause = self.rng.uniform(0.5, 4.0)

        async def restart() -> None:
            await asyncio.sleep(pause)
            while len(self.serving) < 2:
                await self.start_operator()
            await self.leader()
            self.takeovers.append(time.monotonic() - killed_at)

        self.restarting = asyncio.create_task(restart())
        return f"kill {which}: {', '.join(op.name for op in victims) or 'none'}"

    # --------------------------------------------------------------------------- evictions

    def _post(self, port: int, body: bytes) -> dict[str, Any]:
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}{VALIDATE_EVICTION_PATH}", data=body, method="POST",
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=3, context=self.ctx) as answer:
            out: dict[str, Any] = json.loads(answer.read())["response"]
        return out

    async def evict(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The namespace's eviction path: forwarded to the oldest serving replica (as its
        Service would route it); allowed, as ``failurePolicy: Ignore``, when none answers."""
        key = f"{request.get('namespace')}/{request.get('name')}"
        target = next((op for op in self.serving if op.alive), None)
        if target is None:
            self.ledger.note("unguarded: no replica serving")
            return allowed()
        decisions = self.decisions[id(target)]
        seen = decisions.count(key)
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": dict(request)}).encode()
        try:
            response = await asyncio.to_thread(self._post, target.webhook_port, body)
        except (OSError, TimeoutError, ValueError, KeyError):
            self.ledger.note("unguarded: the replica did not answer")
            return allowed()
        response.pop("uid", None)
        if not response.get("allowed"):
            self.ledger.note("refused")
            return response
        made = decisions.after(key, seen)
        if not made:
            self.ledger.note("unguarded: caches not synced")
            return response
        decision = made[-1]
        disrupted = re.findall(r"'([^']*)'", decision["disrupted"])
        if decision["group"] == "None" or decision["group"] in disrupted:
            self.ledger.note("allowed: group already disrupted")
            return response
        self.ledger.note("allowed: healthy group")
        await self.count(decision["set"], decision["group"], str(request.get("name")))
        return response

    async def count(self, set_name: str, group: str, pod: str) -> None:
        """A healthy group taken down by a guarded eviction: judge the other periods' ends on
        a fresh list first (module docstring), then count this one from now on."""
        fresh = {p["metadata"]["name"]: p for p in await self.kube.list("v1", "Pod", self.ns)}
        self.close_periods(fresh)
        uid = (self.view.pods.get(pod) or fresh.get(pod) or {}).get("metadata", {}).get("uid")
        self.ledger.periods.append(Period(set_name, group, pod, uid, time.monotonic()))
        self.judge()

    def close_periods(self, pods: Mapping[str, dict[str, Any]]) -> None:
        uids = {p["metadata"]["uid"] for p in pods.values()}
        still = []
        for period in self.ledger.periods:
            state = self.sets.get(period.set_name)
            gone = state is None or int(period.group) >= state.replicas or (
                period.uid is not None and period.uid not in uids
                and whole_and_ready(pods, period.set_name, period.group))
            late = time.monotonic() - period.started > RESERVATION_SECONDS
            if late and whole_and_ready(pods, period.set_name, period.group) and all(
                    not p["metadata"].get("deletionTimestamp") for p in pods.values()
                    if p["metadata"]["uid"] == period.uid):
                # Allowed by us but never carried out (or a pod the view never knew): the
                # guard's reservation has expired too, and the group is whole and Ready.
                gone = True
            if gone:
                self.ledger.closed += 1
            else:
                still.append(period)
        self.ledger.periods = still

    def judge(self) -> None:
        """The budget's invariant on the current view; the revisions seen fully Ready."""
        self.close_periods(self.view.pods)
        for state in self.sets.values():
            key = fully_ready_on(self.view.pods, state.name, state.replicas)
            if key is not None:
                state.fully_ready.add(key)
        for name, budget in BUDGETS.items():
            groups = sorted({p.group for p in self.ledger.periods if p.set_name == name})
            self.ledger.worst[name] = max(self.ledger.worst.get(name, 0), len(groups))
            if len(groups) > budget:
                down = down_groups(self.view.pods, name, self.sets[name].replicas)
                self.ledger.violations.append(
                    f"{name}: groups {groups} down by guarded evictions of healthy groups "
                    f"(budget {budget}); down now {down}")

    async def sample(self) -> None:
        self.ledger.samples += 1
        self.judge()
        await self.check_hold()
        await self.check_rollback()

    # --------------------------------------------------------------------------- the deadline

    async def check_hold(self) -> None:
        state = self.sets["deadline"]
        epoch = state.epoch
        if state.bad_since is None:
            return
        obj = await self.kube.get(API, KIND, "deadline", self.ns)
        sts = await self.kube.get("apps/v1", "StatefulSet", "deadline", self.ns)
        if obj is None or sts is None or state.epoch != epoch or state.bad_since is None:
            return
        cond: dict[str, Any] = next((c for c in (obj.get("status") or {}).get("conditions") or []
                     if c["type"] == "Progressing"), {})
        if cond.get("reason") != "ProgressDeadlineExceeded" \
                or cond.get("observedGeneration", obj["metadata"]["generation"]) \
                != obj["metadata"]["generation"]:
            return
        now = (sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
               sts["spec"]["replicas"])
        if state.held is None:
            state.held = now
            state.exceeded += 1
        elif now != state.held:
            self.hold_violations.append(
                f"epoch {epoch}: partition/replicas {now} after the deadline held {state.held}")

    # --------------------------------------------------------------------------- the rollback

    async def check_rollback(self) -> None:
        """While ``rollback`` is on a bad template (as far as the test knows): a new value of
        its ``rolled-back-from`` annotation is a rollback; the template it restored becomes the
        set's expected one."""
        state = self.sets["rollback"]
        epoch = state.epoch
        if state.bad_since is None:
            return
        obj = await self.kube.get(API, KIND, "rollback", self.ns)
        if obj is None or state.epoch != epoch or state.bad_since is None:
            return
        self.note_rollback(state, obj)

    def note_rollback(self, state: SetState, obj: Mapping[str, Any]) -> None:
        bad = (obj["metadata"].get("annotations") or {}).get(ROLLED_BACK_FROM)
        if bad is None or bad == state.rolled_back_from:
            return
        state.rolled_back_from = bad
        image = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "image"]
        if any(bad == seen for seen, _ in state.rollbacks):
            self.rollback_violations.append(f"revision {bad} rolled back from twice")
        state.rollbacks.append((bad, image))
        if image == state.last and image not in state.good:
            return  # the test's own bad template, patched over the rollback just after it
        if image not in state.good:
            self.rollback_violations.append(
                f"rolled back from {bad} to image {image}, which the test never rolled to as "
                f"good ({sorted(state.good)})")
        state.image, state.bad_since, state.held = image, None, None
        state.epoch += 1

    async def check_rollback_events(self) -> None:
        """The ``RolledBack`` Events of ``rollback``: one for each rollback seen, at most one per
        bad revision, each to a revision the test saw fully Ready. A rollback made just before
        the test changed the template itself may have gone unseen (``raced``): its Event is
        allowed."""
        state = self.sets["rollback"]
        events = [e for e in await self.kube.list("events.k8s.io/v1", "Event", self.ns)
                  if e.get("reason") == "RolledBack"
                  and (e.get("regarding") or {}).get("name") == "rollback"]
        found = [m.groupdict() for e in events if (m := ROLLED_BACK.match(e.get("note") or ""))]
        assert len(found) == len(events), [e.get("note") for e in events]
        bad = [f["bad"] for f in found]
        assert len(bad) == len(set(bad)), f"a revision rolled back from twice: {found}"
        assert {b for b, _ in state.rollbacks} <= set(bad), \
            f"RolledBack Events {found}, rollbacks seen {state.rollbacks}"
        assert len(bad) - len(state.rollbacks) <= state.raced, \
            f"RolledBack Events {found}, rollbacks seen {state.rollbacks}"
        for event in events:
            assert not event.get("series"), f"a rollback recorded more than once: {event}"
        for got in found:
            if got["to"] not in state.fully_ready:
                self.rollback_violations.append(
                    f"rolled back from {got['bad']} to {got['to']}, never seen fully Ready "
                    f"(seen: {sorted(state.fully_ready)})")

    # --------------------------------------------------------------------------- actions

    async def roll(self, name: str, ready: bool = True) -> str:
        state = self.sets[name]
        if name == "rollback":
            obj = await self.kube.get(API, KIND, name, self.ns)
            if state.bad_since is not None:
                # Racing the operator: a rollback already made is noted before the template
                # moves on (one made between this read and the patch below is left to the
                # Events, ``check_rollback_events``).
                state.raced += 1
                if obj is not None:
                    self.note_rollback(state, obj)
            elif obj is not None:  # a rollback an earlier race left unseen is no new one
                state.rolled_back_from = (obj["metadata"].get("annotations") or {}).get(
                    ROLLED_BACK_FROM)
        state.serial += 1
        state.epoch += 1
        state.held = None
        image = (f"engine:{name[0]}{state.serial}" if ready
                 else f"engine:{name[0]}bad{state.serial}")
        if ready:
            if state.bad_since is not None:
                state.fixed_by_hand += 1
            state.image = image
            state.good.add(image)
            state.bad_since = None
        else:
            state.bad_rolls += 1
            if state.bad_since is None:
                state.bad_since = time.monotonic()
        state.last = image
        await self.kube.patch(API, KIND, name, {"spec": {"leaderWorkerTemplate": {
            "workerTemplate": template(image, ready, self.ns)}}}, self.ns,
            content_type=MERGE_PATCH)
        return f"roll {name} to {image}"

    async def scale(self) -> str:
        state = self.sets["budget"]
        to = self.rng.choice([r for r in (3, 4, 5) if r != state.replicas])
        state.replicas = to
        await self.kube.patch(API, KIND, "budget", {"spec": {"replicas": to}}, self.ns,
                              content_type=MERGE_PATCH)
        return f"scale budget to {to}"

    async def kubectl(self, *args: str) -> tuple[int, str]:
        cluster = self.env.cluster
        proc = await asyncio.create_subprocess_exec(
            str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.kubeconfig), *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        return int(proc.returncode or 0), out.decode()

    def reap_drains(self) -> None:
        for node, task in list(self.drains.items()):
            if task.done():
                code, out = task.result()
                self.drain_results.append((node, code, out.count("group disruption budget")))
                del self.drains[node]

    async def drain(self, patience: str = "60s") -> str:
        self.reap_drains()
        free = [n for n in self.nodes if n not in self.cordoned]
        if len(self.cordoned) >= MAX_CORDONED or not free:
            return await self.uncordon()
        node = self.rng.choice(free)
        self.cordoned.add(node)
        self.drains[node] = asyncio.create_task(self.kubectl(
            "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
            f"--timeout={patience}"))
        return f"drain {node}"

    async def uncordon(self) -> str:
        self.reap_drains()
        idle = [n for n in self.cordoned if n not in self.drains]
        if not idle:
            return "uncordon: none idle"
        node = self.rng.choice(idle)
        code, out = await self.kubectl("uncordon", node)
        assert code == 0, out
        self.cordoned.discard(node)
        return f"uncordon {node}"

    async def step(self) -> str:
        deadline = self.sets["deadline"]
        choices: dict[str, float] = {"drain": 3, "uncordon": 1.5, "roll budget": 1.5,
                                     "scale": 1.5}
        if self.restarting is None or self.restarting.done():
            choices["kill"] = 2  # not while a restart is pending
        if deadline.bad_since is None:
            choices.update({"roll deadline": 1, "bad deadline": 1.5})
        elif time.monotonic() - deadline.bad_since > DEADLINE_SECONDS + 5 \
                and (deadline.held is not None or time.monotonic() - deadline.bad_since > 40):
            choices["fix deadline"] = 3
        rollback = self.sets["rollback"]
        if rollback.bad_since is None:
            choices.update({"roll rollback": 1, "bad rollback": 1.5})
        else:  # racing the operator's rollback: a second bad template, or a fix by hand
            choices.update({"bad rollback": 1, "fix rollback": 0.5})
        kind = self.rng.choices(list(choices), list(choices.values()))[0]
        if kind == "drain":
            return await self.drain()
        if kind == "uncordon":
            return await self.uncordon()
        if kind == "roll budget":
            return await self.roll("budget")
        if kind == "scale":
            return await self.scale()
        if kind == "kill":
            return await self.kill()
        if kind == "bad deadline":
            return await self.roll("deadline", ready=False)
        if kind == "bad rollback":
            return await self.roll("rollback", ready=False)
        if kind in ("roll rollback", "fix rollback"):
            return await self.roll("rollback")
        return await self.roll("deadline")

    # --------------------------------------------------------------------------- the end

    async def finish(self) -> None:
        """Fix, run both replicas, drain every cordoned node to completion, uncordon, and
        check that everything converged with nothing lost."""
        state = self.sets["deadline"]
        if state.bad_since is not None:
            # Let the bad template reach its deadline and be held for a few samples (a short
            # run often ends before it), then fix it.
            async def held() -> bool:
                return state.held is not None

            await wait_for(held, timeout=DEADLINE_SECONDS + 90, what="deadline exceeded")
            await asyncio.sleep(3)
            await self.roll("deadline")
        rollback = self.sets["rollback"]
        if rollback.bad_since is not None:
            # Never fixed by the test: the operator must roll it back (after a kill as well).
            async def rolled_back() -> bool:
                return rollback.bad_since is None

            await wait_for(rolled_back, timeout=DEADLINE_SECONDS + 90,
                           what="the rollback of the bad template")
        # A rollback to the wrong template fails here, not as a set that never converges.
        assert self.rollback_violations == [], "\n".join(self.rollback_violations[:20])
        if self.restarting is not None:
            await self.restarting
        while len(self.serving) < 2:
            await self.start_operator()
        await self.leader()
        for node, task in list(self.drains.items()):
            code, out = await task
            self.drain_results.append((node, code, out.count("group disruption budget")))
        self.drains.clear()
        for node in sorted(self.cordoned):
            code, out = await self.kubectl("drain", node, "--ignore-daemonsets",
                                           "--delete-emptydir-data", "--timeout=240s")
            assert code == 0, f"the final drain of {node} did not complete:\n{out}"
            self.drain_results.append((node, code, out.count("group disruption budget")))
        for node in sorted(self.cordoned):
            code, out = await self.kubectl("uncordon", node)
            assert code == 0, out
        self.cordoned.clear()
        for state in self.sets.values():
            await wait_converged(self.kube, self.ns, state.name, state.replicas, SIZE,
                                 state.image, timeout=300)
        pods = await self.kube.list("v1", "Pod", self.ns)
        want = {f"{s.name}-{g}{w}" for s in self.sets.values() for g in range(s.replicas)
                for w in ("", *(f"-{i}" for i in range(1, SIZE)))}
        assert sorted(p["metadata"]["name"] for p in pods) == sorted(want), \
            "pods lost, orphaned or duplicated"
        statefulsets = [s["metadata"]["name"]
                        for s in await self.kube.list("apps/v1", "StatefulSet", self.ns)]
        want_sts = {n for s in self.sets.values()
                    for n in (s.name, *(f"{s.name}-{g}" for g in range(s.replicas)))}
        assert sorted(statefulsets) == sorted(want_sts), "StatefulSets orphaned or duplicated"
        for state in self.sets.values():
            obj = await self.kube.get(API, KIND, state.name, self.ns)
            assert obj is not None
            assert condition(obj, "Available") == "True"
            assert obj["spec"]["replicas"] == state.replicas
        await self.check_rollback_events()


async def test_drains_template_changes_and_kills_lose_nothing(env: Env) -> None:
    seed = int(os.environ.get("LWS_FUZZ_SEED") or time.time())
    print(f"\n[group safety fuzz] seed {seed} (LWS_FUZZ_SEED={seed} replays), {STEPS} steps",
          flush=True)
    fuzz = Fuzz(env, seed)
    kube, ns = env.kube, env.namespace
    layout = NodeLayout(gpu_nodes=NODES, tpu_nodes=0)
    for name, node in zip(fuzz.nodes, node_manifests(layout), strict=True):
        node["metadata"]["name"] = name
        node["metadata"]["labels"][HOSTNAME_LABEL] = name
        node["metadata"]["labels"][POOL] = ns
        await kube.create(node)
    started = time.monotonic()
    try:
        await fuzz.start_operator()
        await fuzz.start_operator()
        await fuzz.leader()
        env.webhooks.runtime.evictions.decider = fuzz.evict
        budget = (LeaderWorkerSet("budget").replicas(4).size(SIZE)
                  .annotation(MAX_DISRUPTED_GROUPS_ANNOTATION, "1")
                  .worker_template(template("engine:b1", True, ns)).build())
        deadline = (LeaderWorkerSet("deadline").replicas(4).size(SIZE)
                    .annotation(MAX_DISRUPTED_GROUPS_ANNOTATION, "50%")
                    .annotation(OURS + "progress-deadline-seconds", str(DEADLINE_SECONDS))
                    .rolling_update(maxUnavailable=1, maxSurge=1)
                    .worker_template(template("engine:d1", True, ns)).build())
        rollback = (LeaderWorkerSet("rollback").replicas(3).size(SIZE)
                    .annotation(MAX_DISRUPTED_GROUPS_ANNOTATION, "1")
                    .annotation(OURS + "progress-deadline-seconds", str(DEADLINE_SECONDS))
                    .annotation(OURS + "rollback-on-deadline", "true")
                    .rolling_update(maxUnavailable=1, maxSurge=1)
                    .worker_template(template("engine:r1", True, ns)).build())
        await kube.create(budget, ns)
        await kube.create(deadline, ns)
        await kube.create(rollback, ns)
        for state in fuzz.sets.values():
            await wait_converged(kube, ns, state.name, state.replicas, SIZE, state.image)
        await fuzz.view.start()
        async with polling(fuzz.sample, interval=0.15):
            for i in range(STEPS):
                did = await fuzz.step()
                print(f"[group safety fuzz] {i + 1}/{STEPS} {did} "
                      f"({time.monotonic() - started:.0f}s)", flush=True)
                await asyncio.sleep(fuzz.rng.uniform(0.0, 3.0))
            await fuzz.finish()
    finally:
        env.webhooks.runtime.evictions.decider = None
        await fuzz.view.stop()
        for state in fuzz.sets.values():  # pods off the nodes before the nodes go
            await kube.delete(API, KIND, state.name, ns)
        with contextlib.suppress(AssertionError):
            async def no_pods() -> bool:
                return not await kube.list("v1", "Pod", ns)
            await wait_for(no_pods, timeout=120, what="pods gone")
        for name in fuzz.nodes:
            await kube.delete("v1", "Node", name)

    ledger = fuzz.ledger
    rb = fuzz.sets["rollback"]
    failures = [line for op in env.processes for line in op.failures()]
    refusals = sum(n for _, _, n in fuzz.drain_results)
    print(f"[group safety fuzz] seed {seed}: {STEPS} steps in {time.monotonic() - started:.0f}s; "
          f"kills {fuzz.kills}, takeovers "
          f"{', '.join(f'{t:.1f}s' for t in fuzz.takeovers) or 'none'}; drains "
          f"{len(fuzz.drain_results)} ({sum(1 for _, c, _ in fuzz.drain_results if c == 0)} "
          f"completed, {refusals} budget refusals in their output); evictions "
          f"{dict(sorted(ledger.decisions.items()))}; groups down by guarded evictions of "
          f"healthy groups at most {ledger.worst} (budgets {BUDGETS}) over {ledger.samples} "
          f"samples, {ledger.closed} such disruptions ended; deadline exceeded and held "
          f"{fuzz.sets['deadline'].exceeded} time(s); rollback set: {rb.bad_rolls} bad "
          f"templates, {len(rb.rollbacks)} rolled back by the operator, {rb.fixed_by_hand} "
          f"fixed by hand first, fully Ready revisions seen {len(rb.fully_ready)}; "
          f"{len(failures)} error log lines", flush=True)
    assert ledger.violations == [], "\n".join(ledger.violations[:20])
    assert fuzz.hold_violations == [], "\n".join(fuzz.hold_violations[:20])
    assert fuzz.rollback_violations == [], "\n".join(fuzz.rollback_violations[:20])
    assert fuzz.two_leaders == [], fuzz.two_leaders
    assert failures == [], "\n".join(failures[:20])
