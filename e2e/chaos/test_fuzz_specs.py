"""Bad input at scale: hypothesis-generated LeaderWorkerSets, real API.

Specs over every field (``spec_strategies``) go to the full-tier cluster: kube-apiserver with the
committed CRD (OpenAPI schema, structural defaults), our defaulting and validating webhooks, and
the controllers, all served by one real ``lws-operator run`` process (``e2e/harness/launcher.py``)
whose log file is read afterwards.

* **Invalid** (a valid spec plus ONE targeted mutation): the create is refused (400/422 from the
  schema, 403 from a webhook denial, never a webhook 500), the message names the mutated
  field's path, and no object is left behind.
* **Valid**: the create is accepted and the set **converges**, defined as all of: the status
  describes the current generation (``observedGeneration == generation``) with
  ``replicas == readyReplicas == updatedReplicas == spec.replicas`` and ``Available=True``
  (after a template change under an Ordinal ``partition`` p, ``updatedReplicas`` is
  ``replicas - min(p, replicas)``: the groups below the partition stay on the old revision);
  exactly ``replicas * size`` live pods, all Ready, none terminating; the leader object the
  identity calls for (a StatefulSet named after the set for Ordinal, a Deployment and no leader
  StatefulSet for Hash) with ``spec.replicas`` desired; one worker StatefulSet of ``size - 1``
  per group when ``size > 1`` and none otherwise; the headless Service every pod's
  ``spec.subdomain`` names (and the shared one under ``Shared``). That is what the LWS docs say a
  spec "calls for", seen from outside, and it is only reachable because the generated pods fit
  the kwok nodes (see ``spec_strategies``). Then **quiet**: over a further period nothing the
  operator writes for the set changes (the set's resourceVersion, its StatefulSets' and
  Deployment's generation, labels and annotations, its Services and ControllerRevisions, its
  pods' identities, labels and group-ready conditions). A controller that loops on some input
  shows up there; the StatefulSet and Deployment status that kube-controller-manager keeps
  writing does not count.
* **Updates** on converged sets: valid ones (scale, resize, new image, rollout settings, ...)
  converge again and go quiet; invalid ones (immutable fields, broken values) are refused with
  the field's path and leave the stored object exactly as it was.
* Throughout: the operator process never exits (same PID at the end), and its log holds no
  traceback (``Traceback`` anywhere, which covers the JSON ``error`` field) for any input.

Hypothesis usage: examples are drawn up front (``draw_examples``: a ``@given`` function run for
``max_examples`` that only collects) and then sent in concurrent batches, because valid cases
take seconds to converge and must share the cluster; shrinking a batch against a live cluster
would take longer than the run. Instead every failure prints the whole case and the seed;
``LWS_FUZZ_SEED=<n>`` replays a run. The short run (``make test``) is derandomized, so CI sends
the same cases every time; the full run (``make chaos``) draws a fresh seed and prints it.
The pure rules get a shrinking hypothesis test of their own (no cluster): generated valid specs
must pass ``validation.validate`` after ``apply_defaults``, and every webhook-layer mutation must
be flagged there at its path.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import functools
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.chaos import FULL, size
from e2e.chaos.spec_strategies import (
    API,
    INVALID_KINDS,
    KIND,
    InvalidCase,
    ValidCase,
    invalid_cases,
    valid_cases,
)
from e2e.harness.clusters import Clusters
from e2e.harness.launcher import OperatorProcess
from e2e.kube import Kube, condition, is_ready, wait_for
from lws_operator.api.defaults import apply_defaults
from lws_operator.api.validation import validate

T = TypeVar("T")
P = "leaderworkerset.sigs.k8s.io/"
READY_GATE = P + "group-ready"
POKE = "fuzz.example.com/poke"

INVALID_CASES = size(500, 1600)
VALID_CASES = size(40, 480)
BATCH = 8  # valid cases converging at once (each in a namespace of its own)
QUIET_SECONDS = size(3, 4)
CONVERGE_TIMEOUT = 240.0  # liveness only: a 2-core machine shared by several runs
PURE_EXAMPLES = size(150, 2000)


def run_seed() -> int | None:
    """None: derandomized (CI); else the seed of this run (LWS_FUZZ_SEED, or fresh in full)."""
    if os.environ.get("LWS_FUZZ_SEED"):
        return int(os.environ["LWS_FUZZ_SEED"])
    return random.randrange(2**32) if FULL else None


SEED = run_seed()


def draw_examples(strategy: st.SearchStrategy[T], count: int, salt: int) -> list[T]:
    """Up to ``count`` distinct examples of ``strategy``, drawn by hypothesis (derandomized
    without a seed). Hypothesis repeats some examples; repeats are dropped so that the counts
    reported are of distinct cases."""
    found: dict[str, T] = {}

    @settings(max_examples=count * 3 // 2, deadline=None, database=None,
              derandomize=SEED is None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example: T) -> None:
        found.setdefault(repr(example), example)

    if SEED is not None:
        collect = seed(SEED + salt)(collect)
    collect()
    return list(found.values())[:count]


def describe(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True)


# ------------------------------------------------------------------- the pure rules (no cluster)


@settings(max_examples=PURE_EXAMPLES, deadline=None, derandomize=SEED is None,
          suppress_health_check=list(HealthCheck))
@given(valid_cases())
def test_generated_valid_specs_pass_the_pure_rules(case: ValidCase) -> None:
    assert validate(apply_defaults(case.body), None) == []


@settings(max_examples=PURE_EXAMPLES, deadline=None, derandomize=SEED is None,
          suppress_health_check=list(HealthCheck))
@given(invalid_cases())
def test_webhook_mutations_are_flagged_at_their_path_by_the_pure_rules(case: InvalidCase) -> None:
    errors = validate(apply_defaults(case.body), None)  # must not raise, whatever the input
    if case.layer == "webhook":
        assert case.path in {e.path for e in errors}, [str(e) for e in errors]


# ------------------------------------------------------------------------------- the run


@dataclass
class Fuzz:
    kube: Kube
    operator: OperatorProcess
    pid: int
    invalid_namespace: str
    stats: dict[str, collections.Counter[str]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter))
    converge_seconds: list[float] = field(default_factory=list)
    pokes: int = 0

    def check_operator(self) -> None:
        """Alive, never restarted, no traceback in its log."""
        proc = self.operator.process
        assert proc is not None
        assert proc.returncode is None, (
            f"the operator exited ({proc.returncode}):\n{self.operator.log_tail()}")
        assert proc.pid == self.pid
        text = self.operator.log_path.read_text(errors="replace")
        assert "Traceback" not in text, _traceback_excerpt(text)


def _traceback_excerpt(text: str) -> str:
    lines = [line for line in text.splitlines() if "Traceback" in line]
    return "the operator logged a traceback:\n" + "\n".join(line[:3000] for line in lines[:3])


def error_entries(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "critical"):
            out.append(entry)
    return out


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fuzz(clusters: Clusters) -> AsyncIterator[Fuzz]:
    cluster = clusters.get("full")
    cluster.install_crd()
    kube = await Kube.connect(str(cluster.kubeconfig))
    run_id = uuid.uuid4().hex[:8]
    log = cluster.dir / "logs" / f"fuzz-operator-{run_id}.log"
    operator = OperatorProcess.local(str(cluster.kubeconfig), run_id, log,
                               # No /metrics: the default :8443 may be taken by another
                               # operator on this machine, and nothing here reads it.
                               extra_args=["--log-format", "json", "--metrics-bind-address", "0"])
    invalid_ns = f"fuzz-bad-{run_id}"
    for ns in (operator.namespace, invalid_ns):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await operator.start()
    assert operator.process is not None
    print(f"\n[fuzz] seed={SEED if SEED is not None else 'derandomized'} operator pid "
          f"{operator.process.pid}, log {log}")
    state = Fuzz(kube, operator, operator.process.pid, invalid_ns)
    try:
        yield state
    finally:
        await operator.stop()
        for ns in (invalid_ns, operator.namespace):
            await kube.delete("v1", "Namespace", ns)
        report(state)
        await kube.close()


def report(state: Fuzz) -> None:
    """The closing note's numbers (``-s`` shows them)."""
    print("\n[fuzz] ===== bad-input run =====")
    for key in sorted(state.stats):
        counts = state.stats[key]
        print(f"[fuzz] {key}: total {sum(counts.values())}")
        for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"[fuzz]   {n:5d}  {name}")
    if state.converge_seconds:
        secs = state.converge_seconds
        print(f"[fuzz] convergence seconds: n={len(secs)} median {statistics.median(secs):.1f} "
              f"max {max(secs):.1f}")
    errors = error_entries(state.operator.log_path)
    print(f"[fuzz] operator error-level log entries: {len(errors)}")
    for entry in errors[:10]:
        print(f"[fuzz]   {json.dumps(entry)[:400]}")


def rejection(exc: DynamicApiError) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message", ""))
    except ValueError:
        return str(exc.body)


def layer_of(message: str) -> str:
    if 'admission webhook "vleaderworkerset' in message:
        return "webhook"
    if 'admission webhook "mleaderworkerset' in message:
        return "mutating-webhook"
    return "api/schema"


async def gather_limited(count: int, jobs: list[Callable[[], Any]]) -> list[Any]:
    sem = asyncio.Semaphore(count)

    async def one(job: Callable[[], Any]) -> Any:
        async with sem:
            return await job()

    return await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True)


@pytest.mark.full
async def test_invalid_specs_are_rejected_at_their_field(fuzz: Fuzz) -> None:
    # Stratified by mutation kind, so that every kind is sent even in the short run.
    per_kind = -(-INVALID_CASES // len(INVALID_KINDS))
    cases = [case for i, kind in enumerate(INVALID_KINDS)
             for case in draw_examples(invalid_cases(kind), per_kind, salt=100 + i)]
    ns, kube = fuzz.invalid_namespace, fuzz.kube
    failures: list[str] = []
    stats = fuzz.stats

    async def send(case: InvalidCase) -> None:
        name = case.body["metadata"]["name"]
        try:
            await kube.create(case.body, ns)
        except DynamicApiError as exc:
            message = rejection(exc)
            layer = layer_of(message)
            stats["invalid: rejected, by field path"][case.path] += 1
            stats["invalid: rejected, by layer"][f"{layer} (expected {case.layer})"] += 1
            stats["invalid: mutations"][case.mutation] += 1
            problems = []
            if exc.status not in (400, 403, 422):  # 403: our webhook, as upstream's
                problems.append(f"status {exc.status}")
            if "internal error" in message:
                problems.append("webhook 500")
            if case.path not in message:
                problems.append(f"message does not name {case.path}")
            if problems:
                failures.append(f"{'; '.join(problems)}: {case.mutation}\n  message: "
                                f"{message}\n  body: {describe(case.body)}")
        else:
            failures.append(f"ACCEPTED invalid ({case.mutation}, {case.path}): "
                            f"{describe(case.body)}")
            await kube.delete(API, KIND, name, ns)
            return
        # Nothing half-applied: no object under that name (a valid name only: others cannot
        # exist at all).
        if case.path != "metadata.name" and await kube.get(API, KIND, name, ns) is not None:
            failures.append(f"object left behind after a rejection: {describe(case.body)}")
            await kube.delete(API, KIND, name, ns)

    started = time.monotonic()
    results = await gather_limited(8, [functools.partial(send, c) for c in cases])
    failures += [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
    print(f"\n[fuzz] {len(cases)} invalid cases in {time.monotonic() - started:.0f}s, "
          f"{len(failures)} failures")
    stats["cases"]["invalid"] += len(cases)
    left = await kube.list(API, KIND, ns)
    assert not left, [o["metadata"]["name"] for o in left]
    fuzz.check_operator()
    assert not failures, f"seed {SEED}:\n" + "\n".join(failures[:20])


# ------------------------------------------------------------------------- valid cases


async def versions(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    """What the operator writes for the set, by object: see the module docstring ("quiet")."""
    selector = f"{P}name={name}"
    lws = await kube.get(API, KIND, name, ns)
    out: dict[str, Any] = {f"{KIND}/{name}": (lws or {}).get("metadata", {}).get(
        "resourceVersion")}
    for api, kind in (("apps/v1", "StatefulSet"), ("apps/v1", "Deployment")):
        for obj in await kube.list(api, kind, ns, label_selector=selector):
            meta = obj["metadata"]
            out[f"{kind}/{meta['name']}"] = (meta.get("generation"), meta.get("labels"),
                                             meta.get("annotations"))
    for api, kind in (("v1", "Service"), ("apps/v1", "ControllerRevision")):
        for obj in await kube.list(api, kind, ns, label_selector=selector):
            out[f"{kind}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    for pod in await kube.list("v1", "Pod", ns, label_selector=selector):
        gates = [(c["status"], c.get("lastTransitionTime"))
                 for c in pod["status"].get("conditions") or [] if c["type"] == READY_GATE]
        labels = {k: v for k, v in (pod["metadata"].get("labels") or {}).items() if k != POKE}
        out[f"Pod/{pod['metadata']['name']}"] = (pod["metadata"]["uid"], labels, gates)
    return out


async def converged(kube: Kube, ns: str, name: str, replicas: int, group_size: int,
                    hashed: bool, updated: int | None = None) -> str | None:
    """None once the set has converged (module docstring), else what is still missing;
    ``updated`` is the groups expected on the current revision (default: all)."""
    lws = await kube.get(API, KIND, name, ns)
    if lws is None:
        return "no LeaderWorkerSet"
    status = lws.get("status") or {}
    if status.get("observedGeneration") != lws["metadata"].get("generation"):
        return "status not of the current generation"
    counts = (status.get("replicas"), status.get("readyReplicas"), status.get("updatedReplicas"))
    expected = (replicas, replicas, replicas if updated is None else updated)
    if counts != expected or condition(lws, "Available") != "True":
        return f"status {counts}, Available={condition(lws, 'Available')}"
    selector = f"{P}name={name}"
    pods = await kube.list("v1", "Pod", ns, label_selector=selector)
    if any(p["metadata"].get("deletionTimestamp") for p in pods):
        return "pods terminating"
    if len(pods) != replicas * group_size or not all(is_ready(p) for p in pods):
        return f"{len(pods)} pods, {sum(map(is_ready, pods))} ready"
    sets = await kube.list("apps/v1", "StatefulSet", ns, label_selector=selector)
    leader_sts = [s for s in sets if s["metadata"]["name"] == name]
    workers = [s for s in sets if s["metadata"]["name"] != name]
    if hashed:
        deployment = await kube.get("apps/v1", "Deployment", name, ns)
        if deployment is None or deployment["spec"]["replicas"] != replicas or leader_sts:
            return "leader Deployment missing or wrong (or a leader StatefulSet exists)"
    elif not leader_sts or leader_sts[0]["spec"]["replicas"] != replicas:
        return "leader StatefulSet missing or wrong"
    if len(workers) != (replicas if group_size > 1 else 0) or any(
            s["spec"]["replicas"] != group_size - 1 for s in workers):
        return f"{len(workers)} worker StatefulSets"
    services = {s["metadata"]["name"] for s in await kube.list("v1", "Service", ns)}
    policy = ((lws["spec"].get("networkConfig") or {}).get("subdomainPolicy"))
    if policy == "Shared" and name not in services:
        return "no shared Service"
    for pod in pods:
        if pod["spec"].get("subdomain") not in services:
            return f"no Service {pod['spec'].get('subdomain')} for {pod['metadata']['name']}"
    return None


async def settle(kube: Kube, ns: str, name: str, replicas: int, group_size: int,
                 hashed: bool, updated: int | None = None) -> float:
    """Wait for convergence; return how long it took."""
    started = time.monotonic()
    last: list[str | None] = [None]

    async def probe() -> bool:
        last[0] = await converged(kube, ns, name, replicas, group_size, hashed, updated)
        return last[0] is None

    try:
        await wait_for(probe, timeout=CONVERGE_TIMEOUT, interval=1.0, what=f"{ns}/{name}")
    except AssertionError as exc:
        raise AssertionError(f"did not converge: {last[0]}\n{await snapshot(kube, ns)}") from exc
    return time.monotonic() - started


async def snapshot(kube: Kube, ns: str) -> str:
    """What a case that did not converge left: each pod's phase, gates, conditions and node;
    each StatefulSet's and Deployment's replicas and status counts (for the report)."""
    lines = []
    for pod in await kube.list("v1", "Pod", ns):
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        lines.append(f"  pod {meta['name']} {status.get('phase')} node={spec.get('nodeName')} "
                     f"gates={[g['name'] for g in spec.get('schedulingGates') or []]} "
                     f"deleting={bool(meta.get('deletionTimestamp'))} {conditions}")
    for api, kind in (("apps/v1", "StatefulSet"), ("apps/v1", "Deployment")):
        for obj in await kube.list(api, kind, ns):
            counts = {k: v for k, v in (obj.get("status") or {}).items() if "eplicas" in k}
            lines.append(f"  {kind} {obj['metadata']['name']} {obj['spec'].get('replicas')} "
                         f"{counts}")
    return "\n".join(lines)


async def quiet(fuzz: Fuzz, ns: str, name: str) -> None:
    """Nothing written for a converged set while its pods are poked (a label change on each,
    which wakes a pass for the set): the objects keep their versions, and the operator logs
    nothing about the set (it logs every StatefulSet or Deployment re-apply and every
    failed pass, including server-side applies that change nothing and so bump no version)."""
    kube = fuzz.kube
    before = await versions(kube, ns, name)
    offset = fuzz.operator.log_path.stat().st_size
    fuzz.pokes += 1
    for pod in await kube.list("v1", "Pod", ns, label_selector=f"{P}name={name}"):
        await kube.patch("v1", "Pod", pod["metadata"]["name"],
                         {"metadata": {"labels": {POKE: str(fuzz.pokes)}}}, ns)
    await asyncio.sleep(QUIET_SECONDS)
    after = await versions(kube, ns, name)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"writes after convergence (a loop?): {changed}"
    with fuzz.operator.log_path.open("rb") as log:
        log.seek(offset)
        tail = log.read().decode(errors="replace")
    about = [line for line in tail.splitlines() if f'"lws": "{ns}/{name}"' in line]
    assert not about, "the operator acted on a converged set:\n" + "\n".join(
        line[:500] for line in about[:5])


async def remove(kube: Kube, ns: str, name: str) -> None:
    """Delete the set; everything it owns must go (garbage collection, no orphan)."""
    await kube.delete(API, KIND, name, ns)
    selector = f"{P}name={name}"

    async def gone() -> bool:
        if await kube.get(API, KIND, name, ns) is not None:
            return False
        for api, kind in (("v1", "Pod"), ("apps/v1", "StatefulSet"), ("apps/v1", "Deployment")):
            if await kube.list(api, kind, ns, label_selector=selector):
                return False
        return True

    await wait_for(gone, timeout=180, interval=1.0, what=f"{ns}/{name} and its objects gone")


async def run_valid(fuzz: Fuzz, case: ValidCase, index: int) -> None:
    kube, stats = fuzz.kube, fuzz.stats
    ns = f"fuzz-{index:04d}-{uuid.uuid4().hex[:5]}"
    name = case.body["metadata"]["name"]
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        try:
            await kube.create(copy.deepcopy(case.body), ns)
        except DynamicApiError as exc:
            raise AssertionError(f"valid spec rejected: {rejection(exc)}") from exc
        fuzz.converge_seconds.append(
            await settle(kube, ns, name, case.replicas, case.size, case.hashed))
        await quiet(fuzz, ns, name)
        stats["valid: converged and quiet"]["created"] += 1
        for feature in case.features:
            stats["valid: features exercised"][feature] += 1
        update = case.update
        if update is None:
            return
        stored = await kube.get(API, KIND, name, ns)
        assert stored is not None
        try:
            await kube.patch(API, KIND, name, update.patch, ns, subresource=update.subresource)
        except DynamicApiError as exc:
            message = rejection(exc)
            if update.path is None:
                raise AssertionError(f"valid update {update.label} rejected: {message}") from exc
            assert update.path in message, f"update rejection does not name {update.path}: " \
                                           f"{message}"
            after = await kube.get(API, KIND, name, ns)
            assert after is not None
            assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
            stats["updates: invalid, rejected at"][update.path] += 1
            await quiet(fuzz, ns, name)
            return
        assert update.path is None, f"invalid update {update.label} accepted: {update.patch}"
        fuzz.converge_seconds.append(
            await settle(kube, ns, name, update.replicas, update.size, case.hashed,
                         update.updated))
        await quiet(fuzz, ns, name)
        stats["updates: valid, converged"][update.label] += 1
    finally:
        try:
            await remove(kube, ns, name)
        finally:
            await kube.delete("v1", "Namespace", ns)


@pytest.mark.full
@pytest.mark.chaos_run
async def test_valid_specs_converge_and_go_quiet(fuzz: Fuzz) -> None:
    # Half Ordinal, half Hash identity (the two controllers), interleaved.
    ordinal = draw_examples(valid_cases(hashed=False), VALID_CASES // 2, salt=2)
    hashed = draw_examples(valid_cases(hashed=True), VALID_CASES - VALID_CASES // 2, salt=3)
    cases = [c for pair in zip(ordinal, hashed, strict=False) for c in pair]
    cases += ordinal[len(hashed):] + hashed[len(ordinal):]
    failures: list[str] = []
    started = time.monotonic()
    for first in range(0, len(cases), BATCH):
        batch = cases[first:first + BATCH]
        results = await asyncio.gather(*(run_valid(fuzz, c, first + i)
                                         for i, c in enumerate(batch)), return_exceptions=True)
        for case, result in zip(batch, results, strict=True):
            if isinstance(result, BaseException):
                update = case.update and {"label": case.update.label,
                                          "patch": case.update.patch, "path": case.update.path}
                failures.append(f"{type(result).__name__}: {result}\n  body: "
                                f"{describe(case.body)}\n  update: {json.dumps(update)}")
                print(f"[fuzz] FAILED (seed {SEED}): {failures[-1]}", flush=True)
        fuzz.check_operator()
        print(f"[fuzz] valid cases {first + len(batch)}/{len(cases)} "
              f"({time.monotonic() - started:.0f}s, {len(failures)} failures)", flush=True)
    fuzz.stats["cases"]["valid"] += len(cases)
    fuzz.stats["cases"]["updates"] += sum(1 for c in cases if c.update is not None)
    fuzz.check_operator()
    assert not failures, f"seed {SEED}:\n" + "\n\n".join(failures[:10])
