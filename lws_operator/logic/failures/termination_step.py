"""Step: Parallel pod termination (``logic.failures.termination``): foreground-delete the worker
StatefulSets of terminating leaders (all of them while the LeaderWorkerSet is deleted),
each guarded by its UID."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lws_operator.logic.failures.termination import worker_sets_to_stop
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.reconcile.plan import GONE_OR_CHANGED_SKIP, Common, Delete, Plan, apps
from lws_operator.logic.reconcile.snapshot import Observed


def stop_workers(namespace: str, lws: Mapping[str, Any] | None,
                 pods: Iterable[Mapping[str, Any]], statefulsets: Iterable[Mapping[str, Any]],
                 lws_deleting: bool = False) -> Plan:
    return Plan(tuple(
        Delete(apps(namespace, "statefulsets", "StatefulSet"), name_of(sts),
               str(meta_of(sts).get("uid")), propagation="Foreground",
               common=Common(policy=GONE_OR_CHANGED_SKIP))
        for sts in worker_sets_to_stop(lws, pods, statefulsets, lws_deleting=lws_deleting)))


def step(obs: Observed) -> Plan:
    return stop_workers(obs.lws.namespace, obs.body, obs.pods, obs.statefulsets)
