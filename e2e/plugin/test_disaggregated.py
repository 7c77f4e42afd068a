"""The plugin on a DisaggregatedSet end to end: ``tree``, ``why``, ``plan`` and ``rollout status``
of a live two-role set (prefill 2 groups, decode 1, size 1), run as the installed console
script, each checked against the objects the API server holds and the controller's planner.

One set for the module: it converges, is planned and rolled to a second image (``rollout
status`` waits and says each step), then to a third whose pods never turn Ready (kwok's ready
delay), where ``why`` names the role LeaderWorkerSet that holds the rollout, ``plan`` shows the
rollout under way at its live step and ``rollout status`` times out.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import DS_API, DS_KIND, DisaggregatedSet, LeaderWorkerSet, Role
from e2e.harness.disaggregated import PAUSE, Converged, ds_services, wait_converged
from e2e.harness.disaggregated import children as ds_children
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, wait_for

pytestmark = pytest.mark.full

NAME = "plugin-ds"
NEVER = "10000h"


def two_roles(image: str, ready_delay: str = "1s") -> dict[str, Any]:
    def role(name: str, replicas: int) -> Role:
        return (Role(name).replicas(replicas).size(1).image(image, name="model")
                .worker_annotations({READY_DELAY_ANNOTATION: ready_delay}))
    return DisaggregatedSet(NAME).role(role("prefill", 2)).role(role("decode", 1)).build()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def live(ds_operator: Operator) -> Converged:
    """The set converged, with its two Services (made once every role is Ready)."""
    ns = ds_operator.namespace
    await ds_operator.kube.create(two_roles(PAUSE), ns)
    got = await wait_converged(ds_operator.kube, ns, NAME)

    async def services() -> bool:
        return len(await ds_services(ds_operator.kube, ns, NAME)) == 2

    await wait_for(services, timeout=60, what="a Service per role")
    return got


# The planner's walk for prefill 2, decode 1 with the default budgets (surge 1, unavailable 0).
STEPS = [([2, 1], [0, 0], "start"), ([2, 1], [1, 1], "scale up new"),
         ([1, 1], [1, 1], "drain old"), ([1, 1], [2, 1], "scale up new"),
         ([0, 0], [2, 1], "final drain")]


async def test_tree_is_the_sets_children_pods_and_services(
        ds_operator: Operator, live: Converged, ds_kubectl_lws: Any) -> None:
    ns = ds_operator.namespace
    ran = await ds_kubectl_lws("tree", NAME, "-o", "json")
    assert ran.code == 0, ran.err
    got = json.loads(ran.out)
    assert (got["kind"], got["namespace"], got["name"]) == ("DisaggregatedSet", ns, NAME)
    assert got["revision"] == live.revision
    assert got["roles"] == ["prefill", "decode"]
    assert got["conditions"]["Available"] == "True"
    children = got["leaderWorkerSets"]
    assert [(c["role"], c["revision"], c["current"]) for c in children] == [
        ("prefill", live.revision, True), ("decode", live.revision, True)]
    assert {c["tree"]["name"] for c in children} == set(live.lws)
    pods = {p["metadata"]["name"] for p in live.pods}
    assert {p["name"] for c in children for g in c["tree"]["groups"] for p in g["pods"]} == pods
    assert all(g["state"] == "Ready" for c in children for g in c["tree"]["groups"])
    services = await ds_services(ds_operator.kube, ns, NAME)
    assert sorted(s["name"] for s in got["services"]) == sorted(
        s["metadata"]["name"] for s in services)
    assert len(got["services"]) == 2

    text = await ds_kubectl_lws("tree", NAME)
    assert text.code == 0, text.err
    lines = text.out.splitlines()
    assert lines[0].startswith(f"DisaggregatedSet {ns}/{NAME}  (roles prefill ready 2/2, decode "
                               f"ready 1/1; slices 1; revision {live.revision})  Available=True")
    assert lines[1].startswith(f"├── role prefill  slice 0  revision {live.revision}: "
                               f"LeaderWorkerSet {ns}/{NAME}-0-{live.revision}-prefill")
    assert sum(" Service " in line for line in lines) == 2

    # Without NAME: the set with its children inside it, not its children again on their own.
    every = await ds_kubectl_lws("tree", "-o", "json")
    assert every.code == 0, every.err
    items = json.loads(every.out)["items"]
    assert [(i.get("kind"), i["name"]) for i in items] == [("DisaggregatedSet", NAME)]
    everywhere = await ds_kubectl_lws("tree", "-A", "-o", "yaml")
    assert everywhere.code == 0, everywhere.err
    assert (ns, NAME) in {(i["namespace"], i["name"]) for i in yaml.safe_load(everywhere.out)[
        "items"] if i.get("kind") == "DisaggregatedSet"}


async def test_why_of_a_settled_set_and_of_a_role(live: Converged, ds_kubectl_lws: Any) -> None:
    ran = await ds_kubectl_lws("why", NAME)
    assert ran.code == 0, (ran.out, ran.err)
    assert ran.out.splitlines() == [
        f"DisaggregatedSet {live.ds['metadata']['namespace']}/{NAME}: disaggregatedset "
        f'"{NAME}" successfully rolled out', "Nothing blocks it."]
    role = await ds_kubectl_lws("why", NAME, "decode", "-o", "json")
    assert role.code == 0, role.err
    data = json.loads(role.out)
    assert (data["kind"], data["role"], data["available"], data["findings"]) == (
        "DisaggregatedSet", "decode", True, [])
    missing = await ds_kubectl_lws("why", NAME, "encode")
    assert missing.code == 3
    assert "has no role 'encode'" in missing.err


async def test_plan_of_a_change_is_the_planners_walk(live: Converged,
                                                     ds_kubectl_lws: Any) -> None:
    idle = await ds_kubectl_lws("plan", NAME)
    assert idle.code == 0, idle.err
    assert idle.out.startswith("No rollout under way for DisaggregatedSet ")
    same = await ds_kubectl_lws("plan", NAME, "--set-image", f"model={PAUSE}")
    assert same.code == 0, same.err
    assert "the role templates are unchanged" in same.out

    ran = await ds_kubectl_lws("plan", NAME, "--set-image", "model=registry.k8s.io/pause:3.10",
                               "-o", "json")
    assert ran.code == 0, ran.err
    data = json.loads(ran.out)
    assert data["rollout"] is True
    assert data["cause"].startswith("role prefill's templates change (first difference: ")
    (only,) = data["slices"]
    assert only["roles"] == ["prefill", "decode"]
    assert only["oldRevisions"] == [live.revision]
    assert [(s["old"], s["new"], s["action"]) for s in only["steps"]] == STEPS
    text = await ds_kubectl_lws("plan", NAME, "--set-image", "registry.k8s.io/pause:3.10")
    assert text.code == 0, text.err
    assert "STEP  PREFILL OLD|NEW  DECODE OLD|NEW  ACTION" in text.out.splitlines()
    wrong = await ds_kubectl_lws("plan", NAME, "--replicas", "3")
    assert wrong.code == 2


async def test_rollout_status_waits_for_the_coordinated_rollout(
        ds_operator: Operator, live: Converged, ds_kubectl_lws: Any, ds_watch: Any) -> None:
    """The command is started on a rollout held at its first step by a revision that never
    turns Ready, so it is waiting for sure; a fixed image then completes the rollout (over
    both older revisions), and the command ends."""
    ns = ds_operator.namespace
    before = await wait_converged(ds_operator.kube, ns, NAME)
    done = await ds_kubectl_lws("rollout", "status", NAME, "--watch=false")
    assert (done.code, done.out) == (0, f'disaggregatedset "{NAME}" successfully rolled out\n')
    await ds_operator.kube.patch(DS_API, DS_KIND, NAME, two_roles("engine:never", NEVER), ns,
                                 content_type=MERGE_PATCH)
    waiting = await ds_watch("rollout", "status", NAME, "--timeout=5m")
    await waiting.until(lambda out: "slice 0: step 1 of 4, old|new prefill 2|1, decode 1|1; "
                        "waiting for the new revision's groups to be Ready" in out,
                        "the command waiting on the held first step")
    await ds_operator.kube.patch(DS_API, DS_KIND, NAME, two_roles("registry.k8s.io/pause:3.10"),
                                 ns, content_type=MERGE_PATCH)
    assert await waiting.finish() == 0, (waiting.out, waiting.err)
    lines = waiting.out.splitlines()
    assert lines[0].startswith(f'Waiting for disaggregatedset "{NAME}" ')
    assert lines[-1] == f'disaggregatedset "{NAME}" successfully rolled out'
    assert any(line.startswith("  slice 0: step 1 of 4, ") for line in lines)
    after = await wait_converged(ds_operator.kube, ns, NAME, other_than=before.revision)
    assert after.lws[f"{NAME}-0-{after.revision}-prefill"]["spec"]["replicas"] == 2


async def test_a_rollout_held_by_a_role_never_ready(ds_operator: Operator, live: Converged,
                                                    ds_kubectl_lws: Any) -> None:
    ns = ds_operator.namespace
    before = await wait_converged(ds_operator.kube, ns, NAME)
    await ds_operator.kube.patch(DS_API, DS_KIND, NAME, two_roles("engine:never", NEVER), ns,
                                 content_type=MERGE_PATCH)

    async def held() -> bool:
        ran = await ds_kubectl_lws("plan", NAME, "-o", "json")
        data = json.loads(ran.out)
        return bool(data["rollout"]) and data["slices"][0]["currentStep"] == 1

    await wait_for(held, timeout=120, what="the first step taken, its new groups not Ready")
    status = await ds_kubectl_lws("rollout", "status", NAME, "--timeout=3s")
    assert status.code == 4, (status.out, status.err)
    assert "slice 0: step 1 of 4, old|new prefill 2|1, decode 1|1; waiting for the new " \
        "revision's groups to be Ready" in status.out

    why = await ds_kubectl_lws("why", NAME)
    assert why.code == 1, (why.out, why.err)
    lines = why.out.splitlines()
    # The first cause is a new-revision child's (its pods never turn Ready), not the old one's.
    assert lines[1].startswith("Blocked by: "), why.out
    assert f"(LeaderWorkerSet {NAME}-0-" in lines[1]
    assert before.revision not in lines[1]
    assert "old revision" not in lines[1]

    plan = await ds_kubectl_lws("plan", NAME)
    assert plan.code == 0, plan.err
    assert plan.out.startswith("Rollout under way of DisaggregatedSet ")
    marked = [line for line in plan.out.splitlines() if line.endswith("◀ now")]
    assert marked == ["1     2|1              1|1             scale up new  ◀ now"]


def token_kubeconfig(source: Path, token: str, path: Path) -> Path:
    """``source`` with its users authenticating by ``token`` instead."""
    config = yaml.safe_load(source.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


async def test_a_user_who_may_not_read_disaggregatedsets_still_sees_leaderworkersets(
        ds_operator: Operator, live: Converged, ds_kubectl_lws: Any, tmp_path: Path) -> None:
    """A service account allowed LeaderWorkerSets (and their pods and StatefulSets) but no
    DisaggregatedSet: ``tree`` and ``rollout status`` of its sets work as before the plugin
    knew DisaggregatedSets; a DisaggregatedSet's name is refused as the API refuses it."""
    ns = ds_operator.namespace
    await ds_operator.kube.create(LeaderWorkerSet("plain").replicas(1).size(1).image(PAUSE)
                                  .build(), ns)
    kubectl = ds_operator.cluster.kubectl
    for args in (("create", "serviceaccount", "lws-only"),
                 ("create", "role", "lws-only", "--verb=get,list,watch",
                  "--resource=leaderworkersets.leaderworkerset.x-k8s.io,pods,"
                  "statefulsets.apps,deployments.apps"),
                 ("create", "rolebinding", "lws-only", "--role=lws-only",
                  f"--serviceaccount={ns}:lws-only")):
        await asyncio.to_thread(kubectl, *args, "-n", ns)
    token = (await asyncio.to_thread(kubectl, "create", "token", "lws-only", "-n", ns)).strip()
    path = await asyncio.to_thread(token_kubeconfig, Path(ds_operator.kubeconfig), token,
                                   tmp_path / "lws-only")

    one = await ds_kubectl_lws("tree", "plain", "--kubeconfig", str(path))
    assert one.code == 0, one.err
    assert one.out.startswith(f"LeaderWorkerSet {ns}/plain  (Ordinal; replicas 1, size 1;")
    every = await ds_kubectl_lws("tree", "--kubeconfig", str(path), "-o", "json")
    assert every.code == 0, every.err
    names = [i["name"] for i in json.loads(every.out)["items"]]
    assert "plain" in names
    assert NAME not in names  # the set is not readable; its children are shown on their own
    assert sorted(n for n in names if n.startswith(f"{NAME}-")) == sorted(
        f"{NAME}-0-{revision}-{role}" for revision in {
            c["metadata"]["labels"]["disaggregatedset.x-k8s.io/revision"]
            for c in await ds_children(ds_operator.kube, ns, NAME)}
        for role in ("prefill", "decode"))
    status = await ds_kubectl_lws("rollout", "status", "plain", "--kubeconfig", str(path),
                                  "--timeout=2m")
    assert status.code == 0, (status.out, status.err)
    refused = await ds_kubectl_lws("tree", NAME, "--kubeconfig", str(path))
    assert refused.code == 1
    assert refused.err.startswith("Error: 403 Forbidden")


async def test_a_name_both_kinds_carry_needs_the_kind(ds_operator: Operator, live: Converged,
                                                      ds_kubectl_lws: Any) -> None:
    """A LeaderWorkerSet named as the DisaggregatedSet: the name alone is refused (exit 2),
    ``--kind`` picks one."""
    ns = ds_operator.namespace
    await ds_operator.kube.create(LeaderWorkerSet(NAME).replicas(1).size(1).image(PAUSE)
                                  .build(), ns)
    both = await ds_kubectl_lws("tree", NAME)
    assert both.code == 2
    assert both.err == (f'Error: "{NAME}" names both a LeaderWorkerSet and a DisaggregatedSet '
                        f'in namespace "{ns}": pass --kind\n')
    status = await ds_kubectl_lws("rollout", "status", NAME, "--watch=false")
    assert status.code == 2
    assert "pass --kind" in status.err
    lws = await ds_kubectl_lws("tree", NAME, "--kind", "leaderworkerset")
    assert lws.code == 0, lws.err
    assert lws.out.startswith(f"LeaderWorkerSet {ns}/{NAME}  ")
    ds = await ds_kubectl_lws("tree", NAME, "--kind=disaggregatedset", "-o", "json")
    assert ds.code == 0, ds.err
    assert json.loads(ds.out)["kind"] == "DisaggregatedSet"
