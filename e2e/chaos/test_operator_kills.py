"""Operator kills: SIGKILL ``lws-operator run`` at random moments during
create, rollout, scale and group recreation; after each restart the system must converge.

One operator process (leader election off, so a restart takes over at once) manages three kinds
of LeaderWorkerSet in one namespace:

* ``still``: created first and never touched; none of its pods may ever be replaced.
* ``work``: rolled to new images, scaled between 2 and 4 groups, and has groups failed (a
  container restart, which a kubelet reports and which persists on the pod, so a pass that died
  sees it again). It counts restarts (``maxGroupRestarts``), so every recreation must add
  exactly one to its group's counter: a count of two for one failure is a double-counted
  budget, a count of zero a lost recreation.
* ``born-<i>``: the create iteration deletes the previous one and creates the next.

Each iteration makes one change, kills the operator after a random delay (0-3 s: before its
first pass, in the middle of the work, or after it is done), restarts it after a random pause,
and then checks convergence plus exactly which pods changed: all of ``work`` for a rollout, only
the new or removed groups for a scale, only the failed group for a recreation, and never a pod
of any other LeaderWorkerSet. Sizes: ``size(8, 50)`` iterations, the kinds in turn.

``test_kill_between_counting_and_recreating`` places one kill at the exact moment the random
ones rarely hit: after a pass wrote a group's restart count and before it deleted the leader.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from typing import Any

import pytest

from e2e.chaos import size
from e2e.cluster.faults import restart_container
from e2e.harness.builder import API, KIND, LeaderWorkerSet
from e2e.harness.converge import (
    READY_DELAY,
    Converged,
    converged_now,
    group_pods,
    lws_pods,
    restart_counts,
    wait_converged,
)
from e2e.harness.launcher import OperatorProcess
from e2e.harness.replicas import Env
from e2e.kube import wait_for

pytestmark = pytest.mark.full

ITERATIONS = size(8, 50)
KINDS = ("create", "rollout", "scale", "recreate")
SIZE = 2
BUDGET = 10_000  # counting on, never exhausted


def lws(name: str, replicas: int, size: int, **template: Any) -> dict[str, Any]:
    """A LeaderWorkerSet whose pods turn Ready at once (kwok)."""
    return (LeaderWorkerSet(name).replicas(replicas).size(size).template(**template)
            .image("engine:v1").build())


def slow(obj: dict[str, Any], delay: str = "1s") -> dict[str, Any]:
    """Pods turn Ready ``delay`` after they start, so a rollout takes several seconds and a
    kill can land in the middle of it."""
    template = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template.setdefault("metadata", {}).setdefault("annotations", {})[READY_DELAY] = delay
    return obj


class Run:
    """The state the iterations share, and what they measured."""

    def __init__(self, env: Env, seed: int) -> None:
        self.env = env
        self.rng = random.Random(seed)
        self.op: OperatorProcess | None = None
        self.restarts = 0
        self.image = 1
        self.replicas = 3
        self.born = 0
        self.kills = 0
        self.mid_operation = 0  # kills that found the change not yet converged
        self.recreations = 0
        self.by_kind: dict[str, int] = {}

    async def start_operator(self) -> None:
        self.restarts += 1
        self.op = self.env.operator(f"kills-{self.restarts}", "--leader-elect=false",
                                    "--workers", "4")
        await self.op.start()

    async def settled(self, name: str, replicas: int, image: str) -> Converged:
        return await wait_converged(self.env.kube, self.env.namespace, name, replicas, SIZE,
                                    image)

    async def kill_soon(self, name: str, replicas: int, image: str) -> None:
        """Kill the operator after a random delay, note whether the change was still in
        progress, restart it after a random pause."""
        await asyncio.sleep(self.rng.uniform(0.0, 3.0))
        assert self.op is not None
        await self.op.kill()
        self.kills += 1
        state = await converged_now(self.env.kube, self.env.namespace, name, replicas, SIZE,
                                    image)
        if isinstance(state, str):
            self.mid_operation += 1
        await asyncio.sleep(self.rng.uniform(0.0, 1.0))
        await self.start_operator()


async def test_random_kills_converge(env: Env) -> None:
    seed = int(time.time())
    print(f"\n[operator kills] seed {seed}, {ITERATIONS} iterations", flush=True)
    run = Run(env, seed)
    kube, ns = env.kube, env.namespace
    started = time.monotonic()
    await run.start_operator()
    await kube.create(slow(lws("still", replicas=2, size=SIZE)), ns)
    still = (await run.settled("still", 2, "engine:v1")).pods
    await kube.create(slow(lws("work", replicas=run.replicas, size=SIZE,
                               maxGroupRestarts=BUDGET)), ns)
    work = await run.settled("work", run.replicas, "engine:v1")
    born: Converged | None = None

    for i in range(ITERATIONS):
        kind = KINDS[i % len(KINDS)]
        run.by_kind[kind] = run.by_kind.get(kind, 0) + 1
        image = f"engine:v{run.image}"
        if kind == "create":
            previous = f"born-{run.born}"
            run.born += 1
            name = f"born-{run.born}"
            if born is not None:
                await kube.delete(API, KIND, previous, ns)
            await kube.create(slow(lws(name, replicas=2, size=SIZE)), ns)
            await run.kill_soon(name, 2, "engine:v1")
            born = await run.settled(name, 2, "engine:v1")

            async def previous_gone(previous: str = previous) -> bool:
                return not await lws_pods(kube, ns, previous)

            await wait_for(previous_gone, timeout=120, what=f"{previous}'s pods gone")
            after = await run.settled("work", run.replicas, image)
            assert after.pods == work.pods, f"iteration {i}: create touched work"
        elif kind == "rollout":
            run.image += 1
            image = f"engine:v{run.image}"
            await kube.patch(API, KIND, "work", {"spec": {"leaderWorkerTemplate": {
                "workerTemplate": {"spec": {"containers": [
                    {"name": "engine", "image": image}]}}}}}, ns)
            await run.kill_soon("work", run.replicas, image)
            after = await run.settled("work", run.replicas, image)
            assert after.revision != work.revision
            kept = {n for n in after.pods if after.pods[n] == work.pods.get(n)}
            assert not kept, f"iteration {i}: rollout left {sorted(kept)} on the old revision"
        elif kind == "scale":
            to = run.rng.choice([r for r in (2, 3, 4) if r != run.replicas])
            await kube.patch(API, KIND, "work", {"spec": {"replicas": to}}, ns)
            await run.kill_soon("work", to, image)
            after = await run.settled("work", to, image)
            common = min(to, run.replicas)
            for g in range(common):  # groups on both sides of the scale: untouched
                for pod in group_pods("work", g, SIZE):
                    assert after.pods[pod] == work.pods[pod], \
                        f"iteration {i}: scale {run.replicas}->{to} replaced {pod}"
            run.replicas = to
        else:
            group = run.rng.randrange(run.replicas)
            before = restart_counts(work.lws)
            await restart_container(kube, ns, f"work-{group}-1")
            await run.kill_soon("work", run.replicas, image)

            async def replaced(image: str, before: Converged) -> Converged | None:
                """Converged with some pod replaced (converged alone may be the state before
                the failure was acted on)."""
                got = await converged_now(kube, ns, "work", run.replicas, SIZE, image)
                if isinstance(got, str):
                    return None
                return got if any(got.pods[n] != before.pods.get(n) for n in got.pods) else None

            recreated = await wait_for(functools.partial(replaced, image, work), timeout=180,
                                       what=f"group {group} recreated")
            assert recreated is not None
            after = recreated
            changed = {n for n in after.pods if after.pods[n] != work.pods.get(n)}
            assert changed == group_pods("work", group, SIZE), \
                f"iteration {i}: failing group {group} replaced {sorted(changed)}"
            key = f"{after.revision}/{group}"
            # Counts no group can spend any more (an earlier revision's, a group scaled away)
            # are dropped once the set is updated; the rest carry over, plus this recreation.
            spendable = {k: v for k, v in before.items() if k.split("/")[0] == after.revision
                         and int(k.split("/")[1]) < run.replicas}
            expected = {**spendable, key: spendable.get(key, 0) + 1}
            assert restart_counts(after.lws) == expected, \
                f"iteration {i}: restart counts {restart_counts(after.lws)}, expected {expected}"
            run.recreations += 1
        work = after
        if born is not None and kind != "create":
            now = await run.settled(born.lws["metadata"]["name"], 2, "engine:v1")
            assert now.pods == born.pods, f"iteration {i} ({kind}) touched {now.lws['metadata']}"
        now_still = await run.settled("still", 2, "engine:v1")
        assert now_still.pods == still, f"iteration {i} ({kind}) replaced pods of still"
        print(f"[operator kills] {i + 1}/{ITERATIONS} {kind}: converged "
              f"({time.monotonic() - started:.0f}s)", flush=True)

    failures = [line for op in env.processes for line in op.failures()]
    print(f"[operator kills] {ITERATIONS} iterations ({run.by_kind}), {run.kills} SIGKILLs, "
          f"{run.mid_operation} of them mid-operation, {run.recreations} group recreations "
          f"each counted once, 0 pods of unaffected groups replaced, {len(failures)} error "
          f"log lines, {time.monotonic() - started:.0f}s", flush=True)
    assert failures == [], "\n".join(failures[:20])


def hold_deletes(namespace: str, pod: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ValidatingAdmissionPolicy (and its binding) that denies every DELETE of ``pod`` in
    ``namespace``: the operator's deletion of a leader fails, as if it died just before it."""
    name = f"hold-{namespace}"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
                  {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                   "resources": ["pods"]}]},
                  "validations": [{"expression": f"oldObject.metadata.name != '{pod}'",
                                   "message": f"chaos test: {pod} is held"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {
                            "kubernetes.io/metadata.name": namespace}}}}}
    return policy, binding


async def deletable(env: Env, pod: str) -> bool:
    """Whether a server-side dry-run DELETE of ``pod`` is admitted."""
    out = await asyncio.to_thread(env.cluster.kubectl, "-n", env.namespace, "delete", "pod",
                                  pod, "--dry-run=server", check=False)
    return "deleted" in out


async def test_kill_between_counting_and_recreating(env: Env) -> None:
    """maxGroupRestarts 1 and a failed group: the pass writes the count (1) and then fails to
    delete the leader (an admission policy holds it); the operator is killed there. The next
    operator must recreate the group, with the count still 1: the budget was spent on this
    failure already, and spending it again would exhaust the group instead of restarting it."""
    kube, ns = env.kube, env.namespace
    op = env.operator("held", "--leader-elect=false")
    await op.start()
    await kube.create(lws("held", replicas=2, size=SIZE, maxGroupRestarts=1), ns)
    before = await wait_converged(kube, ns, "held", 2, SIZE, "engine:v1")
    policy, binding = hold_deletes(ns, "held-1")
    await kube.create(policy)
    await kube.create(binding)
    try:
        async def held() -> bool:
            return not await deletable(env, "held-1")

        await wait_for(held, timeout=60, what="the policy in effect")
        await restart_container(kube, ns, "held-1-1")
        key = f"{before.revision}/1"

        async def counted() -> bool:
            got = await kube.get(API, KIND, "held", ns)
            return got is not None and restart_counts(got) == {key: 1}

        await wait_for(counted, timeout=60, what="the restart counted")
        await asyncio.sleep(3)  # the operator retries the deletion meanwhile, counting nothing
        got = await kube.get(API, KIND, "held", ns)
        assert got is not None
        assert restart_counts(got) == {key: 1}
        leader = await kube.get("v1", "Pod", "held-1", ns)
        assert leader is not None
        assert leader["metadata"]["uid"] == before.pods["held-1"]
        await op.kill()
    finally:
        await kube.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding",
                          binding["metadata"]["name"])
        await kube.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy",
                          policy["metadata"]["name"])

    async def released() -> bool:
        return await deletable(env, "held-1")

    await wait_for(released, timeout=60, what="the policy gone")
    await env.operator("after-held", "--leader-elect=false").start()

    async def recreated() -> Converged | None:
        got = await converged_now(kube, ns, "held", 2, SIZE, "engine:v1")
        if isinstance(got, str) or got.pods["held-1"] == before.pods["held-1"]:
            return None
        return got

    after = await wait_for(recreated, timeout=120, what="group 1 recreated")
    assert after is not None
    changed = {n for n in after.pods if after.pods[n] != before.pods[n]}
    assert changed == group_pods("held", 1, SIZE)
    assert restart_counts(after.lws) == {key: 1}
    failures = [line for p in env.processes for line in p.failures()]
    print(f"\n[operator kills] kill between counting and recreating: group recreated once, "
          f"count {restart_counts(after.lws)}; error log lines: {len(failures)}", flush=True)
