"""LeaderWorkerSets in every namespace, on the full tier.

Upstream serves every namespace. A LeaderWorkerSet in the operator's own namespace or in
``kube-system`` must start like any other: its pods admitted by the pod webhook, with their
group labels and LWS environment. Our registration used to leave both namespaces out of the pod
webhooks, so such a set never started and the operator logged a traceback on every pass.

Where the webhooks are configured to leave a namespace out (an install's namespaceSelector; here
the namespace lies outside the registration's confinement), a LeaderWorkerSet there cannot be
served: it must say so with ``Progressing=False``/``PodsNotMutated`` and exactly one Warning
Event, and passes over it must write nothing and log no error.

The webhooks registered here serve the test namespace, the operator's (``<ns>-op``) and
``kube-system``, and no other (registered by URL from this process, as ``make run`` does); the
controllers run in this process too.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster import LocalCluster
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.harness.clusters import Clusters
from e2e.harness.launcher import Operator, start_controllers
from e2e.kube import Kube, condition, is_ready, wait_for
from lws_operator.api.defaults import apply_defaults
from lws_operator.logic.status.pacing import SETTLED_LONGEST

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"


@dataclass
class Setup:
    op: Operator
    operator_namespace: str  # the webhook options' namespace: the operator's own
    excluded: str  # a namespace the webhooks do not serve


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def setup(clusters: Clusters) -> AsyncIterator[Setup]:
    cluster: LocalCluster = clusters.get("full")
    cluster.install_crd()
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    operator_namespace, excluded = f"{namespace}-op", f"{namespace}-out"
    for ns in (namespace, excluded):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    hooks = await start_webhooks(str(cluster.kubeconfig), options_for(
        namespace, only_namespaces=(namespace, operator_namespace, "kube-system")))
    controllers = await start_controllers(str(cluster.kubeconfig))
    op = Operator(kube, namespace, controllers.runtime, controllers.registry,
                  str(cluster.kubeconfig), cluster)
    yield Setup(op, operator_namespace, excluded)
    for ns in (namespace, operator_namespace, excluded, "kube-system"):
        for lws in await kube.list(API, KIND, ns):
            await kube.delete(API, KIND, lws["metadata"]["name"], ns)
    await controllers.close()
    await stop_webhooks(hooks)  # deletes the operator's namespace
    for ns in (namespace, excluded):
        await kube.delete("v1", "Namespace", ns)
    await kube.close()


def sample(name: str, replicas: int = 2, size: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": API, "kind": KIND, "metadata": {"name": name},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": {
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}},
    }


@contextmanager
def operator_errors() -> Iterator[list[logging.LogRecord]]:
    """The operator's log records of this block that are warnings, errors or tracebacks."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING or record.exc_info:
                records.append(record)

    handler = Collect(logging.DEBUG)
    logger = logging.getLogger("lws_operator")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


async def ready_set(op: Operator, name: str, ns: str, replicas: int,
                    size: int) -> list[dict[str, Any]]:
    async def probe() -> list[dict[str, Any]] | None:
        lws = await op.kube.get(API, KIND, name, ns)
        pods = [p for p in await op.kube.list("v1", "Pod", ns, label_selector=f"{P}name={name}")
                if not p["metadata"].get("deletionTimestamp")]
        if (condition(lws, "Available") == "True" and len(pods) == replicas * size
                and all(is_ready(p) for p in pods)):
            return pods
        return None

    pods = await wait_for(probe, timeout=120, what=f"{ns}/{name} to be ready")
    assert pods is not None
    return pods


@pytest.mark.parametrize("where", ["operator", "kube-system"])
async def test_a_set_in_a_system_namespace_starts(setup: Setup, where: str) -> None:
    op = setup.op
    ns = setup.operator_namespace if where == "operator" else "kube-system"
    name = f"sys-{uuid.uuid4().hex[:6]}"
    with operator_errors() as errors:
        await op.kube.create(sample(name), ns)
        pods = await ready_set(op, name, ns, replicas=2, size=2)
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert sorted(by_name) == sorted(f"{name}-{g}{w}" for g in (0, 1) for w in ("", "-1"))
    for group in (0, 1):
        key = hashlib.sha1(f"{ns}/{name}-{group}".encode()).hexdigest()
        for worker in (0, 1):
            pod = by_name[f"{name}-{group}" + (f"-{worker}" if worker else "")]
            labels = pod["metadata"]["labels"]
            assert labels[P + "group-index"] == str(group)
            assert labels[P + "worker-index"] == str(worker)
            assert labels[P + "group-key"] == key
            env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
            assert env == {"LWS_LEADER_ADDRESS": f"{name}-{group}.{name}.{ns}",
                           "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": str(worker)}
    for group in (0, 1):
        assert await op.kube.get("apps/v1", "StatefulSet", f"{name}-{group}", ns) is not None
    assert not [r.getMessage() for r in errors if ns in r.getMessage() or r.exc_info]
    await op.kube.delete(API, KIND, name, ns)


async def test_a_set_the_webhook_does_not_serve_says_so_once(setup: Setup) -> None:
    op, ns = setup.op, setup.excluded
    name = "unserved"
    with operator_errors() as errors:
        # As the defaulting webhook would have stored it (it does not serve this namespace
        # either).
        await op.kube.create(apply_defaults(sample(name)), ns)

        async def stuck() -> dict[str, Any] | None:
            lws = await op.kube.get(API, KIND, name, ns)
            pods = await op.kube.list("v1", "Pod", ns, label_selector=f"{P}name={name}")
            for cond in ((lws or {}).get("status") or {}).get("conditions") or []:
                if (cond["type"] == "Progressing" and cond["reason"] == "PodsNotMutated"
                        and len(pods) == 2 and cond["message"].startswith("2 pods")):
                    return dict(cond)
            return None

        cond = await wait_for(stuck, timeout=90, what="Progressing=False, PodsNotMutated")
        assert cond is not None
        assert cond["status"] == "False"
        assert "pod webhook mpod.kb.io" in cond["message"]
        assert f"does not serve namespace {ns}" in cond["message"]
        # Passes over it, again and again, write nothing and record nothing more.
        # The last status write's watch event, and a write of the counters alone, which waits
        # up to SETTLED_LONGEST seconds for a set that says it is not progressing
        # (logic.status.pacing).
        await asyncio.sleep(SETTLED_LONGEST + 2)
        before = op.writes()
        for _ in range(3):
            op.runtime.queue.add((ns, name))
            await asyncio.sleep(1)
        assert op.writes() == before
    await op.recorded()
    events = [e for e in await op.kube.list("events.k8s.io/v1", "Event", ns)
              if e["regarding"].get("name") == name and e["type"] == "Warning"]
    # One Event, when the state began: the StatefulSet may have created one pod or both by
    # then, so its count and example pod may differ from the condition's by now (the message is
    # updated without a second Event); the rest of the text is the same.
    def beyond_count(message: str) -> str:
        return re.sub(rf"^[12] pods? of this LeaderWorkerSet \(e\.g\. {name}-[01],", "", message)

    assert [(e["reason"], beyond_count(e["note"])) for e in events] == [
        ("PodsNotMutated", beyond_count(cond["message"]))]
    assert beyond_count(cond["message"]) != cond["message"]
    assert not [r.getMessage() for r in errors if ns in r.getMessage() or r.exc_info]
    lws = await op.kube.get(API, KIND, name, ns)
    assert condition(lws, "Available") != "True"
    # No group was formed from the unmutated leaders: the leader StatefulSet alone.
    assert [s["metadata"]["name"] for s in await op.kube.list(
        "apps/v1", "StatefulSet", ns, label_selector=f"{P}name={name}")] == [name]
