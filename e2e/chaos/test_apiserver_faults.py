"""API server faults: a real ``lws-operator run`` process survives
kube-apiserver restarts and expired watches (410 Gone) without being restarted, converges, and
then writes nothing.

* Restarts: an operation (create, rollout, scale) is started, and kube-apiserver is restarted
  while the operator is in the middle of it (SIGKILL, or SIGTERM, after which the pinned
  version keeps its watch connections open and silent until it is killed). Restarting it also
  expires every watch: its new watch cache starts at etcd's current revision, older than which
  it answers 410.
* Expiry through compaction: kube-apiserver is stopped, and while the operator cannot reach it,
  the cluster is changed through another kube-apiserver on another port (a Service or a worker
  StatefulSet deleted, a LeaderWorkerSet scaled, rolled or deleted), etcd is compacted to its
  current revision and kube-apiserver comes back on its own port. The operator's watches
  resume from resourceVersions that no longer exist: 410 Gone, proven by the operator's
  ``lws_operator_watch_relistings_total`` (a kind listed again), then a listing, which
  replaces the kind's cache (what it lacks is delivered as a deletion) and must be acted on:
  the change made in the gap is reconciled.

After each fault: same operator PID, still running; the namespace converges to what the test
asked for (every group's pods Ready with the right image, one StatefulSet per group plus the
leader one, one headless Service, nothing left of a removed LeaderWorkerSet); then no object
changes its resourceVersion over a quiet period. ``make chaos`` runs 20 of each.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from e2e.chaos import size
from e2e.cluster import LocalCluster
from e2e.cluster.launcher import free_port
from e2e.harness.apiserver_faults import (
    API,
    KIND,
    Desired,
    assert_at_rest,
    converge,
    counter,
    lws,
    orphans,
    tolerant,
)
from e2e.harness.clusters import Clusters, private_cluster
from e2e.harness.launcher import OperatorProcess
from e2e.kube import Kube, wait_for

pytestmark = [pytest.mark.full, pytest.mark.chaos_run]

RESTARTS = size(2, 20)
EXPIRIES = size(2, 20)
QUIET = float(size(5, 15))  # seconds every object must keep its resourceVersion
CONVERGE = 180.0  # a liveness deadline, not a measurement
STALL = float(size(30, 60))  # stalled: time to look for objects the garbage collector missed
SEED = int(time.time())
# Leader election stays on, as deployed, with a renew deadline longer than any outage here: a
# leader that cannot renew its Lease within the deadline exits by design (controller-runtime's
# rule, which keeps two leaders from ever writing at once), so with the default 10 s an outage
# longer than that ends in a container restart, which is not what this module tests.
LEADER_ELECTION = ["--leader-elect-lease-duration", "90s", "--leader-elect-renew-deadline", "60s",
                   "--leader-elect-retry-period", "2s"]


@dataclass
class Setup:
    cluster: LocalCluster
    kube: Kube
    namespace: str
    operator: OperatorProcess
    metrics_port: int
    pid: int
    tally: dict[str, float] = field(default_factory=dict)

    async def alive(self, what: str) -> None:
        """The operator was never restarted: same process, still running (and the control
        plane is supervised meanwhile)."""
        await self.supervise(what)
        proc = self.operator.process
        assert proc is not None
        assert proc.pid == self.pid
        assert proc.returncode is None, (
            f"{what}: the operator exited with {proc.returncode}:\n{self.operator.log_tail()}")

    async def supervise(self, what: str) -> None:
        """A kubelet's part for the control plane: kube-scheduler exits on purpose when it
        finds its cache inconsistent (seen after an API server restart: "Pod updated on a
        different node than previously added to"), and a kubelet would start it again; so
        does this, counted in the totals."""
        for component in ("kube-controller-manager", "kube-scheduler", "kwok"):
            if not self.cluster.running(component):
                print(f"[apiserver-faults] {what}: {component} exited; starting it again")
                self.count(f"{component}-exits")
                await asyncio.to_thread(self.cluster.restart_component, component)

    async def converge(self, want: Desired, what: str) -> float:
        """Wait until the namespace matches ``want`` (the operator alive all along).

        kube-controller-manager's garbage collector can miss an owner's deletion for good when
        the owner was deleted and recreated under the same name while its watches were down
        (client-go's relisting compares by name, so the old UID never looks deleted): seen
        here as the worker pods of a rolled group left owned by the previous worker
        StatefulSet, which blocks the new one forever. That is not the operator's doing, and
        waiting cannot fix it, so once convergence stalls with such orphans present,
        kube-controller-manager is restarted (rebuilding the collector's graph), once, and
        counted in the report."""
        try:
            return await converge(self.kube, self.namespace, want, STALL, what, alive=self.alive)
        except AssertionError:
            found = await tolerant(lambda: orphans(self.kube, self.namespace))
            if not found:
                raise
        print(f"[apiserver-faults] {what}: garbage collection stalled on {found}: "
              "restarting kube-controller-manager")
        self.count("kcm-restarts")
        await asyncio.to_thread(self.cluster.restart_component, "kube-controller-manager")
        return STALL + await converge(self.kube, self.namespace, want, CONVERGE, what,
                                      alive=self.alive)

    async def expired(self) -> float:
        return sum((await counter(self.metrics_port, "lws_operator_watch_relistings")).values())

    def count(self, key: str, by: float = 1.0) -> None:
        self.tally[key] = self.tally.get(key, 0.0) + by


@pytest.fixture(scope="module")
def own_cluster(clusters: Clusters) -> Iterator[LocalCluster]:
    """A full-tier cluster of this module's own: restarting its API server and compacting its
    etcd leave marks the later modules of a shared cluster tripped over (CI runs in which
    every module after this one failed), so the faults stay here. With
    ``LWS_E2E_KUBECONFIG`` (an existing cluster) there is nothing to restart: skipped."""
    if clusters.external:
        pytest.skip("API server faults need a local cluster of their own")
    with private_cluster("chaos-apiserver", "full") as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def setup(own_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
                ) -> AsyncIterator[Setup]:
    cluster = own_cluster
    await asyncio.to_thread(cluster.install_crd)
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    metrics_port = free_port()
    logs: Path = tmp_path_factory.mktemp("apiserver-faults")
    op = OperatorProcess.local(str(cluster.kubeconfig), uuid.uuid4().hex[:8], logs / "operator.log",
                         extra_args=["--metrics-bind-address", f"127.0.0.1:{metrics_port}",
                                     "--metrics-secure=false", "--workers", "4",
                                     *LEADER_ELECTION])
    await kube.create({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": op.namespace}})
    await op.start()
    assert op.process is not None
    out = Setup(cluster, kube, namespace, op, metrics_port, op.process.pid)
    print(f"\n[apiserver-faults] seed {SEED}, operator log {op.log_path}")
    try:
        yield out
    finally:
        # Leave the shared cluster healthy for the next module: kube-apiserver on its own port,
        # every component still running, our objects and the operator gone.
        try:
            if await asyncio.to_thread(cluster.ensure_apiserver):
                print("[apiserver-faults] kube-apiserver restored after a failure")
            names = {o["metadata"]["name"] for o in await kube.list(API, KIND, namespace)}
            for name in names:
                await kube.delete(API, KIND, name, namespace)
            await out.converge(Desired(gone=names), "cleanup")
        finally:
            code = await op.stop()
            if code != 0:  # it could not unregister its webhooks, which would fail later pods
                for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                    short = "mutating" if kind.startswith("Mutating") else "validating"
                    await kube.delete("admissionregistration.k8s.io/v1", kind,
                                      f"lws-{short}-{op.run_id}")
            await kube.delete("v1", "Namespace", namespace)
            await kube.delete("v1", "Namespace", op.namespace)
            await kube.close()
        print(f"[apiserver-faults] totals: {out.tally}")
        await out.supervise("the end")  # components that exited are running again
        assert cluster.running("etcd")
        assert code == 0, f"the operator exited with {code}:\n{op.log_tail()}"


async def test_apiserver_restarts_mid_operation(setup: Setup) -> None:
    """RESTARTS restarts of kube-apiserver, each one while an operation is under way."""
    rng = random.Random(SEED)
    kube, ns = setup.kube, setup.namespace
    want = Desired({"r": (2, "engine:v1")})
    await kube.create(lws("r", 2, "engine:v1"), ns)
    await setup.converge(want, "initial")
    expired_before = await setup.expired()
    extra = 0  # the LeaderWorkerSet "create" operations replace
    operations = ("create", "rollout", "scale", "rollout", "scale")
    for i in range(RESTARTS):
        operation = operations[i % len(operations)]
        replicas, image = want.present["r"]
        if operation == "create":
            if extra:
                await kube.delete(API, KIND, f"c{extra}", ns)
                want.present.pop(f"c{extra}")
                want.gone.add(f"c{extra}")
            extra += 1
            await kube.create(lws(f"c{extra}", 2, "engine:v1"), ns)
            want.present[f"c{extra}"] = (2, "engine:v1")
        elif operation == "rollout":
            image = f"engine:v{i + 2}"
            await kube.patch(API, KIND, "r", {"spec": {"leaderWorkerTemplate": {
                "workerTemplate": {"spec": {"containers": [
                    {"name": "engine", "image": image}]}}}}}, ns)
        else:
            replicas = 3 if replicas != 3 else 1
            await kube.patch(API, KIND, "r", {"spec": {"replicas": replicas}}, ns)
        want.present["r"] = (replicas, image)
        await asyncio.sleep(rng.uniform(0.0, 1.5))  # somewhere in the middle of the passes
        kill = i % 2 == 0
        down = await asyncio.to_thread(setup.cluster.restart_apiserver, kill=kill, grace=2.0)
        setup.count("restarts")
        took = await setup.converge(want, f"restart {i} during {operation}")
        objects = await assert_at_rest(kube, ns, QUIET, f"after restart {i} ({operation})")
        print(f"[apiserver-faults] restart {i + 1}/{RESTARTS} ({'SIGKILL' if kill else 'SIGTERM'}"
              f") during {operation}: down {down:.1f}s, converged {took:.1f}s later, "
              f"{objects} objects unchanged for {QUIET:.0f}s")
    expired = await setup.expired() - expired_before
    print(f"[apiserver-faults] {RESTARTS} restarts survived; watch expiries (410) seen by the "
          f"operator: {expired:.0f}")
    assert expired > 0, "no restart ever expired a watch: the test did not test expiry"
    for name in list(want.present):
        await kube.delete(API, KIND, name, ns)
    await setup.converge(Desired(gone={*want.present, *want.gone}), "removal")


async def test_watch_expiry_through_compaction(setup: Setup) -> None:
    """EXPIRIES cycles: the cluster changes while the operator cannot see it, etcd is compacted,
    the watches expire (410, proven by the operator's counter) and the change is acted on."""
    kube, ns, cluster = setup.kube, setup.namespace, setup.cluster
    want = Desired({"x": (2, "engine:v1"), "y1": (2, "engine:v1")})
    for name in want.present:
        await kube.create(lws(name, 2, "engine:v1"), ns)
    await setup.converge(want, "initial")
    changes = ("delete-service", "delete-worker-statefulset", "scale", "delete-lws", "rollout")
    generation = 1
    expired_total = 0.0
    for i in range(EXPIRIES):
        change = changes[i % len(changes)]
        expired_before = await setup.expired()
        deleted_before = await counter(setup.metrics_port,
                                       "lws_operator_watch_relisting_deletions")
        # The outage: kube-apiserver is stopped, so the operator (and every other client)
        # cannot reach the API, while the test changes the cluster through a second one that
        # was started beforehand (short outages: kwok's nodes must not miss their heartbeats).
        async with contextlib.AsyncExitStack() as stack:
            side_config = await asyncio.to_thread(stack.enter_context, cluster.side_apiserver())
            side = await Kube.connect(str(side_config))
            stack.push_async_callback(side.close)
            await asyncio.to_thread(cluster.stop_apiserver, kill=True)
            replicas, image = want.present["x"]
            if change == "delete-service":
                assert await side.delete("v1", "Service", "x", ns) is not None
            elif change == "delete-worker-statefulset":
                assert await side.delete("apps/v1", "StatefulSet", "x-1", ns) is not None
            elif change == "scale":
                replicas = 3 if replicas != 3 else 2
                await side.patch(API, KIND, "x", {"spec": {"replicas": replicas}}, ns)
            elif change == "rollout":
                image = f"engine:v{i + 2}"
                await side.patch(API, KIND, "x", {"spec": {"leaderWorkerTemplate": {
                    "workerTemplate": {"spec": {"containers": [
                        {"name": "engine", "image": image}]}}}}}, ns)
            else:
                await side.delete(API, KIND, f"y{generation}", ns)
                want.present.pop(f"y{generation}")
                want.gone.add(f"y{generation}")
            want.present["x"] = (replicas, image)
            revision = await asyncio.to_thread(cluster.compact_etcd)
            down = time.monotonic()
            await asyncio.to_thread(cluster.start_apiserver)
            down = time.monotonic() - down
        setup.count("compactions")

        async def expiry_seen(since: float = expired_before) -> float:
            return await setup.expired() - since

        expired = await wait_for(expiry_seen, timeout=120, interval=0.5,
                                 what=f"cycle {i}: the operator's watches answered 410 Gone")
        expired_total += expired
        took = await setup.converge(want, f"cycle {i} ({change})")
        if change == "delete-lws":  # a new one, made while nothing is failing
            generation += 1
            await kube.create(lws(f"y{generation}", 2, "engine:v1"), ns)
            want.present[f"y{generation}"] = (2, "engine:v1")
            await setup.converge(want, f"cycle {i}: y{generation}")
        objects = await assert_at_rest(kube, ns, QUIET, f"after cycle {i} ({change})")
        dropped = await counter(setup.metrics_port, "lws_operator_watch_relisting_deletions")
        forgotten = {k: v - deleted_before.get(k, 0.0) for k, v in dropped.items()
                     if v != deleted_before.get(k, 0.0)}
        print(f"[apiserver-faults] expiry {i + 1}/{EXPIRIES} ({change}): etcd compacted to "
              f"{revision}, {expired:.0f} watches expired (410), deletions found by the "
              f"relistings {forgotten}, converged in {took:.1f}s, {objects} objects unchanged "
              f"for {QUIET:.0f}s")
    print(f"[apiserver-faults] {EXPIRIES} compaction cycles survived; watch expiries (410) "
          f"seen by the operator: {expired_total:.0f}")
    for name in list(want.present):
        await kube.delete(API, KIND, name, ns)
    await setup.converge(Desired(gone={*want.present, *want.gone}), "removal")


async def test_no_object_lost_duplicated_or_left_behind(setup: Setup) -> None:
    """After both runs: the operator never restarted, and the namespace holds nothing."""
    await setup.alive("the end")
    leftovers = await tolerant(lambda: setup.kube.list("apps/v1", "StatefulSet",
                                                       setup.namespace))
    assert leftovers == [], leftovers
