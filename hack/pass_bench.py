"""The CPU of one LeaderWorkerSet reconcile pass, without a cluster: µs per pass and per step.

The controller's CPU is mostly its passes (issue "Performance": about half of the busy samples
of a benchmark run), and a pass is pure work over the watch caches, so it can be measured on its
own. This builds sets as production builds them, in the operator's real cache
(``tests/harness/lws_world.py``: 5 groups of 8 pods by default), in three states: at rest,
mid-create (groups not ready yet, one without its worker StatefulSet) and mid-rollout (a new
template, its revision and leader StatefulSet applied, no group replaced yet). Each pass follows
one watch event, as in a running operator: a pod of the set is stored again with a new
resourceVersion (the same content), then the pass runs.

* ``at-rest``: the real ``LeaderWorkerSetReconciler.reconcile`` (runner, executor): a set at rest
  plans nothing, so no request is made (a client that fails on any request proves it).
* every state, ``plan`` mode: the real pass (``logic.leaderworkerset.pipeline.reconcile``, with the
  reconciler's own configuration and ``may_recreate``) and a ``run`` that calls the reconciler's
  own ``observe`` before every step, plans computed but not carried out (a write would change
  the world; here every pass decides the same), which is the pass's CPU minus the requests.
  Per-step figures include the step's ``observe``.

``--check`` also runs every pass with a fresh reconciler (nothing held, no memo) and fails if
a plan differs. ``--profile`` runs only one state's passes, for ``py-spy record -- python -m
hack.pass_bench --profile rollout --rounds 100``.

    .venv/bin/python -m hack.pass_bench [--sets 5] [--replicas 5] [--size 8] [--passes 400]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from lws_operator.controllers.leaderworkerset import LeaderWorkerSetReconciler
from lws_operator.controllers.passes import PassEnds, plan_through
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.logic.leaderworkerset.pipeline import reconcile
from lws_operator.logic.mutation import unmutated
from lws_operator.logic.reconcile.plan import Plan, Planned
from tests.harness.lws_world import CLOCK, NOW, World, at_rest, built_world, manifest, plan_pass


class NoRequests:
    """The client of a pass that must make no request."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a pass at rest made a request ({name})")


class NoEvents:
    def record(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a pass at rest recorded an Event")


def _not_ready(pod: dict[str, Any]) -> None:
    pod["status"]["phase"] = "Pending"
    for cond in pod["status"]["conditions"]:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond["status"] = "False"
    for status in pod["status"]["containerStatuses"]:
        status["ready"] = False


def _new_image(lws: dict[str, Any]) -> None:
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] = "app:2"


def _world(state: str, replicas: int, size: int) -> World:
    body = manifest(size=size, replicas=replicas)
    if state == "create":
        states: dict[str, Callable[[dict[str, Any]], None]] = {
            f"{group}/{ordinal}": _not_ready
            for group in range(replicas // 2, replicas) for ordinal in range(size)}
        world = at_rest(built_world(body, states=states))
        last = world.cache["StatefulSet"].get("ns", f"sample-{replicas - 1}")
        if last is not None:  # its leader's worker StatefulSet is not created yet
            world.cache["StatefulSet"].delete(last)
        return world
    world = at_rest(built_world(body))
    if state == "rollout":
        lws = world.lws
        _new_image(lws)
        lws["metadata"]["resourceVersion"] = "500"
        lws["metadata"]["generation"] = 2
        world.cache["LeaderWorkerSet"].upsert(lws)
        plan_pass(world)  # the revision, the leader StatefulSet at the new partition, status
    return world


def _merge(worlds: list[World]) -> tuple[ClusterCache, list[Key]]:
    """The worlds' objects in one cache, each set under its own name."""
    cache = ClusterCache()
    for store in cache.stores.values():
        store.synced = True
    keys: list[Key] = []
    for n, world in enumerate(worlds):
        keys.append(("ns", f"sample{n}"))
        for kind, store in world.cache.stores.items():
            for owner in [*store.owners(), world.key]:
                for obj in store.owned_by(owner):
                    cache[kind].upsert(_renamed(obj, n))
    return cache, keys


def _renamed(obj: dict[str, Any], n: int) -> dict[str, Any]:
    """``obj`` of set ``sample`` as the object of set ``sample<n>``: JSON text replaced."""
    text = json.dumps(obj).replace('"sample', f'"sample{n}').replace(
        "/name\": \"sample\"", f"/name\": \"sample{n}\"")
    out: dict[str, Any] = json.loads(text)
    out["metadata"]["uid"] = f"{out['metadata'].get('uid', '')}-{n}"
    for ref in out["metadata"].get("ownerReferences") or []:
        ref["uid"] = f"{ref.get('uid', '')}-{n}"
    return out


def _touch(cache: ClusterCache, key: Key, tick: int) -> None:
    """One watch event of one pod of ``key``: the same pod at a new resourceVersion."""
    pods = cache["Pod"].owned_by(key)
    pod = copy.copy(pods[tick % len(pods)])
    pod["metadata"] = {**pod["metadata"], "resourceVersion": str(1000 + tick)}
    cache["Pod"].upsert(pod)


def _plan_pass(reconciler: LeaderWorkerSetReconciler, key: Key,
               timings: dict[str, float] | None) -> list[Plan]:
    """The reconciler's pass, plans computed but not carried out (module docstring)."""
    tombstones = tuple(unmutated.split(reconciler.cache.tombstones(key))[0])
    plans: list[Plan] = []

    async def run(step: Callable[..., Plan | Planned[Any]], /, *args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        obs = reconciler.observe(key, tombstones)
        assert obs is not None
        result = step(obs, *args, **kwargs)
        if timings is not None:
            timings[f"{step.__module__.rsplit('.', 1)[-1]}.{step.__qualname__}"] += (
                time.process_time() - start)
        plan = result.plan if isinstance(result, Planned) else result
        plans.append(plan)
        if plan.stop:
            raise PassEnds(gone=False)
        return result.value if isinstance(result, Planned) else None

    lws = reconciler.cache["LeaderWorkerSet"].get(*key)
    assert lws is not None
    plan_through(reconcile(run, reconciler.configuration(key, lws),
                           lambda: reconciler.may_recreate(key)))
    return plans


def _reconciler(cache: ClusterCache) -> LeaderWorkerSetReconciler:
    # A fixed clock, as ``now``: a deferred status write (``logic.status.pacing``) remembers
    # the clock, and two reconcilers must plan alike.
    return LeaderWorkerSetReconciler(NoRequests(), cache, NoEvents(),  # type: ignore[arg-type]
                                     now=lambda: NOW, clock=lambda: CLOCK)


def run_state(state: str, sets: int, replicas: int, size: int, passes: int, rounds: int,
              check: bool) -> tuple[float, dict[str, float]]:
    """µs per pass (plan mode) and per step for ``state``: the round with the least CPU (the
    machine is shared; the least disturbed round is the steadiest figure)."""
    cache, keys = _merge([_world(state, replicas, size) for _ in range(sets)])
    reconciler = _reconciler(cache)
    for key in keys:  # warm up: one pass each, as after the operator's start
        _plan_pass(reconciler, key, None)
    best: tuple[float, dict[str, float]] | None = None
    tick = 0
    for _ in range(rounds):
        timings: dict[str, float] = defaultdict(float)
        for _ in range(passes):
            key = keys[tick % len(keys)]
            _touch(cache, key, tick)
            tick += 1
            plans = _plan_pass(reconciler, key, timings)
            if check and _plan_pass(_reconciler(cache), key, None) != plans:
                raise SystemExit(f"{state}: the memo changed a plan of {key}")
        total = sum(timings.values())
        if best is None or total < best[0]:
            best = total, dict(timings)
    assert best is not None
    return 1e6 * best[0] / passes, {k: 1e6 * v / passes for k, v in best[1].items()}


def run_at_rest(sets: int, replicas: int, size: int, passes: int, rounds: int) -> float:
    """µs per pass of the real ``reconcile`` over sets at rest (the least disturbed round)."""
    cache, keys = _merge([_world("rest", replicas, size) for _ in range(sets)])
    reconciler = _reconciler(cache)

    async def go() -> float:
        for key in keys:
            await reconciler.reconcile(key)
        best = float("inf")
        tick = 0
        for _ in range(rounds):
            spent = 0.0
            for _ in range(passes):
                key = keys[tick % len(keys)]
                _touch(cache, key, tick)
                tick += 1
                start = time.process_time()
                await reconciler.reconcile(key)
                spent += time.process_time() - start
            best = min(best, spent)
        return best

    return 1e6 * asyncio.run(go()) / passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=5)
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--passes", type=int, default=200, help="passes per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--check", action="store_true",
                        help="compare every plan with one computed without the memo")
    parser.add_argument("--profile", choices=("rest", "create", "rollout"),
                        help="run only this state's passes (under py-spy; more --rounds)")
    args = parser.parse_args()
    if args.profile:  # the world is built once: the profile shows passes only
        run_state(args.profile, args.sets, args.replicas, args.size, args.passes, args.rounds,
                  False)
        return
    print(f"{args.sets} sets x {args.replicas} groups x {args.size} pods, "
          f"{args.passes} passes per round, best of {args.rounds} rounds (process CPU)")
    rest = run_at_rest(args.sets, args.replicas, args.size, args.passes, args.rounds)
    print(f"at-rest reconcile (runner, executor): {rest:8.1f} us/pass")
    for state in ("rest", "create", "rollout"):
        per_pass, steps = run_state(state, args.sets, args.replicas, args.size, args.passes,
                                    args.rounds, args.check)
        print(f"{state:8s} plan only: {per_pass:8.1f} us/pass")
        for name, us in steps.items():
            print(f"    {name:36s} {us:8.1f}")


if __name__ == "__main__":
    main()
