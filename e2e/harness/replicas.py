"""Operator processes started into a confined namespace: the high-availability and chaos runs'
set-up (several replicas, killed, stopped and failed over).

The processes run the controllers (cluster-wide, as a user runs them) and serve their webhooks
in Service mode, registered nowhere: admission for the test namespace comes from webhooks in the
test process, confined to it. Killing an operator therefore stops exactly the controllers, never
the admission of other namespaces of the shared cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from e2e.cluster import LocalCluster
from e2e.harness.admission import Webhooks, confined_namespaces
from e2e.harness.builder import API, KIND
from e2e.harness.clusters import Clusters
from e2e.harness.launcher import OperatorProcess
from e2e.kube import Kube, wait_for


@dataclass
class Env:
    """A test namespace with confined admission, and the operator processes started for it."""

    cluster: LocalCluster
    kube: Kube
    namespace: str
    operator_namespace: str
    logs: Path
    # The in-process admission side of ``namespace``: its eviction path allows everything
    # unless a test gives it a decider (the disruption fuzz forwards to an operator process).
    webhooks: Webhooks
    processes: list[OperatorProcess] = field(default_factory=list)

    def operator(self, name: str, *extra_args: str) -> OperatorProcess:
        """A new operator process (not started); its log is ``operator-<name>.log``."""
        op = OperatorProcess.replica(name, str(self.cluster.kubeconfig), self.operator_namespace,
                                     self.logs / f"operator-{name}.log", list(extra_args))
        self.processes.append(op)
        return op


@contextlib.asynccontextmanager
async def running_env(clusters: Clusters, logs: Path, suffix: str = "ctl",
                      drain_timeout: float = 120.0) -> AsyncIterator[Env]:
    """The full-tier cluster with the CRD, a fresh namespace with our webhooks confined to it,
    a second one (``<namespace>-<suffix>``) for the operators; at the end every
    LeaderWorkerSet there is deleted (with an operator running, since our finalizer may hold
    retained pods), its pods awaited for ``drain_timeout`` seconds, and the operators stopped."""
    cluster = clusters.get("full")
    async with confined_namespaces(cluster, suffix) as (kube, namespace, operator_namespace,
                                                        hooks):
        out = Env(cluster, kube, namespace, operator_namespace, logs, hooks)
        try:
            yield out
        finally:
            # Delete while an operator still runs (our finalizer may hold retained pods).
            if not any(op.alive for op in out.processes):
                with contextlib.suppress(Exception):
                    await out.operator("cleanup").start()
            for obj in await kube.list(API, KIND, namespace):
                await kube.delete(API, KIND, obj["metadata"]["name"], namespace)

            async def no_pods() -> bool:
                return not await kube.list("v1", "Pod", namespace)

            with contextlib.suppress(AssertionError):
                await wait_for(no_pods, timeout=drain_timeout, what="pods gone")
            for op in out.processes:
                await op.stop(60)
