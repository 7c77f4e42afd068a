"""``kubectl lws plan``: a dry run of the rollout a change would cause; nothing is written.

It reads the set, its leader StatefulSet, leader pods and worker StatefulSets (GET and LIST
only), applies the change to a copy (``lws_operator.plugin.analysis.set_change``) and runs the
controller's own pacing over it (``lws_operator.plugin.analysis.rollout_preview``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

import yaml
from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api.constants import GROUP_KEY_LABEL, NAME_LABEL, WORKER_INDEX_LABEL
from lws_operator.api.view import (
    LEADER_INDEX,
    LeaderWorkerSetView,
    StatefulSetView,
    deleting,
    lws_view,
    revision_of,
)
from lws_operator.logic.placement.gang import gated
from lws_operator.logic.rollout.pacing import LeaderStatefulSetState, group_states
from lws_operator.logic.status.readiness import confirmed_by_pods, pod_ready
from lws_operator.plugin.analysis.hash_rollout_preview import (
    GATED,
    HASH_SYMBOLS,
    READY,
    STARTING,
    TEARING,
    HashPreview,
    HashPreviewError,
    HashPreviewInput,
    LiveHashGroup,
    preview_hash_rollout,
)
from lws_operator.plugin.analysis.rollout_preview import (
    BATCH,
    READY_ORDERS,
    SYMBOLS,
    LiveGroup,
    Preview,
    PreviewInput,
    preview_rollout,
)
from lws_operator.plugin.analysis.set_change import (
    ChangeError,
    ImageChange,
    parse_image,
    proposed,
    refusal,
    template_change,
)
from lws_operator.plugin.cli import Session
from lws_operator.plugin.output import Paint, add_output_option, colour_enabled, dump
from lws_operator.plugin.tree import lws_path, pods_path

HELP = ("dry-run a change: the rolling update's step table (DisaggregatedSets: the "
        "coordinated rollout's); nothing is written")
DESCRIPTION = """\
Show what a change to a LeaderWorkerSet would do, without writing anything: whether it
replaces groups at all (a change of the leader/worker templates or size does; replicas, the
rollout strategy and metadata do not), and for Ordinal group identity the rolling update step
by step, as in the LWS docs' trace table: stage, the leader StatefulSet's partition and replicas
(surge groups included), each group's state, and how many groups are available.

The steps come from the controller's own pacing code, run pass after pass from the live state
and assuming every group it replaces becomes Ready (a group not Ready now stays so unless it
is replaced). Which groups turn Ready first is up to the cluster; --ready-order chooses:
  batch  every group whose update began in the same pass turns Ready together (default)
  one    one group at a time, oldest update first, lowest ordinal first

States: ✅ new revision, Ready  ⏳ new revision, not Ready yet  ❎ old revision, Ready
        ❌ old revision, not Ready.   R-n* is a surge group.
The first row is the live state (✅ = on the current revision).

The same pacing as the upstream controller's, so the table holds for its sets too.

Hash group identity (the LWS docs' "Hash Mode"): the leader Deployment paces the rollout, so the
table simulates its rolling update (the new ReplicaSet grows within maxSurge, the old one
shrinks within maxUnavailable, counting only groups Ready as a whole) together with the
controller's own group-replacement admission (PostTermination: a replacement stays gated
until a group tearing down is gone; Immediate: ungated at once; at most replicas groups of a
revision ungated). One row per stage: the old-revision and new-revision groups and their
states, and how many groups are available. Timing is a model, as in the LWS docs' trace: a
group tearing down is gone one stage later, an ungated group Ready two stages after it was
ungated; --ready-order does not apply. Live groups keep their group keys (first 8
characters); G-1, G-2, ... stand for the random keys of groups the rollout creates.
  ✅ Ready   ⏳ starting (ungated, not Ready yet)   🔒 SchedulingGated (group-replacement)
  🗑️ tearing down (leader terminating, pods still exist)

A DisaggregatedSet (-f with its new manifest, or --set-image applied to every role): whether
the change rolls it (a change of the roles or of a role's templates does; replicas, budgets,
slices and placement do not), then the coordinated rollout's steps from the controller's own
planner, one row per step, each role's old|new groups: scale up the new revision, drain the
old, both in one step, the final drain. Without a change, the rollout under way, its live step
marked. Each step is taken once the new revision's groups are all Ready; a slice like an
earlier one is not shown twice."""
EPILOG = """\
examples:
  kubectl lws plan my-set --set-image engine=vllm/vllm-openai:v0.9
  kubectl lws plan my-set --set-image vllm/vllm-openai:v0.9      every container
  kubectl lws plan my-set -f my-set.yaml
  kubectl lws plan my-set --size 8 --replicas 6                  resize and scale together
  kubectl lws plan my-set --replicas 6                           a scale: no group replaced
  kubectl lws plan my-set --set-image vllm:v2 --ready-order one -o yaml
  kubectl lws plan my-hash-set --set-image vllm:v2               a Hash set: Deployment stages
  kubectl lws plan my-disaggregated --set-image model=vllm:v2    every role's new revision
  kubectl lws plan my-disaggregated                              the rollout under way"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan", help=HELP, description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", metavar="NAME", help="the LeaderWorkerSet or DisaggregatedSet")
    parser.add_argument("-f", "--filename", metavar="FILE",
                        help="the new manifest (YAML or JSON; - for stdin): its spec replaces "
                        "the live one")
    parser.add_argument("--set-image", action="append", default=[],
                        metavar="[CONTAINER=]IMAGE",
                        help="a new image for the named container (or every container) of "
                        "the leader and worker templates; repeatable")
    parser.add_argument("--replicas", type=int, metavar="N", help="new spec.replicas")
    parser.add_argument("--size", type=int, metavar="N",
                        help="new spec.leaderWorkerTemplate.size (replaces every group)")
    parser.add_argument("--ready-order", choices=READY_ORDERS, default=BATCH,
                        help="which replaced groups the simulation turns Ready first "
                        "(default: batch; Ordinal group identity only)")
    add_output_option(parser)
    parser.set_defaults(run=run)


def load_manifest(path: str) -> dict[str, Any]:
    if path == "-":
        text = sys.stdin.read()
    else:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    docs = [d for d in yaml.safe_load_all(text) if d]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise ChangeError(f"{path}: expected exactly one LeaderWorkerSet manifest")
    return docs[0]


def hash_state(leader: Mapping[str, Any]) -> str:
    """A live Hash group's state, read off its leader pod."""
    if deleting(leader):
        return TEARING
    if gated(leader):
        return GATED
    return READY if pod_ready(leader) else STARTING


async def live_hash_groups(session: Session, lws: Mapping[str, Any],
                           deployment: Mapping[str, Any] | None) -> tuple[LiveHashGroup, ...]:
    """The live groups of a Hash set, oldest first: each leader pod's state, and whether it is
    on the leader Deployment's current revision."""
    view = lws_view(lws)
    leaders = await session.kube.request("GET", pods_path(view.namespace), query={
        "labelSelector": f"{NAME_LABEL}={view.name},{WORKER_INDEX_LABEL}={LEADER_INDEX}"})
    current = revision_of(deployment) if deployment is not None else ""
    pods = sorted(leaders.get("items") or [], key=lambda p: (
        str((p.get("metadata") or {}).get("creationTimestamp") or ""),
        str((p.get("metadata") or {}).get("name") or "")))
    return tuple(LiveHashGroup(
        name=str((p.get("metadata") or {}).get("labels", {}).get(GROUP_KEY_LABEL)
                 or (p.get("metadata") or {}).get("name") or "?")[:8],
        state=hash_state(p), current=revision_of(p) == current) for p in pods)


async def live_groups(session: Session, lws: Mapping[str, Any],
                      sts: Mapping[str, Any]) -> tuple[LiveGroup, ...]:
    """Each ordinal of the leader StatefulSet: Ready, and on the current revision, judged as
    the controller judges them (``logic.rollout.pacing.group_states``)."""
    view = lws_view(lws)
    ns = view.namespace
    # Every pod of the set: the leaders, and the workers that may show a group ready before
    # its worker StatefulSet's status does (``readiness.confirmed_by_pods``).
    pods = (await session.kube.request("GET", pods_path(ns), query={
        "labelSelector": f"{NAME_LABEL}={view.name}"})).get("items") or []
    workers = (await session.kube.request(
        "GET", f"/apis/apps/v1/namespaces/{ns}/statefulsets",
        query={"labelSelector": f"{NAME_LABEL}={view.name}"})).get("items") or []
    states = group_states(view.name, view.size, revision_of(sts),
                          StatefulSetView.of(sts).replicas, pods, workers,
                          confirmed_by_pods(workers, pods))
    return tuple(LiveGroup(ready=s.ready, current=s.updated) for s in states)


def preview_data(preview: Preview) -> dict[str, Any]:
    return {"complete": preview.complete, "minAvailable": preview.min_available,
            "error": preview.error,
            "steps": [{"stage": r.stage, "partition": r.partition, "replicas": r.replicas,
                       "groups": list(r.groups), "available": r.available,
                       "description": r.description} for r in preview.rows]}


def hash_preview_data(preview: HashPreview) -> dict[str, Any]:
    """The Hash step table as data: the Ordinal shape, with the old and new revisions' groups
    (name and state) in place of the partition and the per-ordinal states."""
    return {"complete": preview.complete, "minAvailable": preview.min_available,
            "error": None,
            "deployment": {"maxUnavailable": preview.max_unavailable,
                           "maxSurge": preview.max_surge},
            "steps": [{"stage": r.stage,
                       "oldGroups": [{"name": c.name, "state": c.state} for c in r.old],
                       "newGroups": [{"name": c.name, "state": c.state} for c in r.new],
                       "available": r.available, "description": r.description}
                      for r in preview.rows]}


def hash_table(preview: HashPreview, replicas: int, paint: Paint) -> list[str]:
    """The LWS docs' Hash trace table: one row per stage, old and new revisions' groups."""
    def cells(groups: Any) -> str:
        return ", ".join(f"{c.name} {HASH_SYMBOLS[c.state]}" for c in groups) or "none"
    olds = [cells(r.old) for r in preview.rows]
    news = [cells(r.new) for r in preview.rows]
    # an emoji takes two columns of a terminal, as one character (🗑️ is two code points)
    def width(text: str) -> int:
        return len(text.replace("\ufe0f", "")) + sum(text.count(s) for s in "✅⏳🔒🗑")
    ow = max(width(t) for t in [*olds, "OLD GROUPS"])
    nw = max(width(t) for t in [*news, "NEW GROUPS"])
    lines = [f"STAGE  {'OLD GROUPS'.ljust(ow)}  {'NEW GROUPS'.ljust(nw)}  AVAILABLE  "
             "DESCRIPTION"]
    for r, old, new in zip(preview.rows, olds, news, strict=True):
        lines.append(f"{str(r.stage).ljust(5)}  {old}{' ' * (ow - width(old))}  "
                     f"{new}{' ' * (nw - width(new))}  {_available(r.available, replicas, paint)}  "
                     f"{r.description}")
    return lines


def _available(available: int, replicas: int, paint: Paint) -> str:
    """The AVAILABLE cell of both tables: green once every group is available."""
    return paint(f"{available}/{replicas}".ljust(9), "green" if available >= replicas else "yellow")


def table(preview: Preview, replicas: int, paint: Paint) -> list[str]:
    """The LWS docs' trace table: one row per stage, one column per group."""
    width = max(len(r.groups) for r in preview.rows)
    heads = [f"R-{i}{'*' if i >= replicas else ''}" for i in range(width)]
    cols = [max(len(h), 3) for h in heads]
    header = ["STAGE", "PARTITION", "REPLICAS"]
    columns = " ".join(h.ljust(c) for h, c in zip(heads, cols, strict=True))
    lines = ["  ".join(header) + "  " + columns + "  AVAILABLE  DESCRIPTION"]
    for r in preview.rows:
        cells = []
        for i in range(width):
            # an emoji takes two columns of a terminal
            cells.append((SYMBOLS[r.groups[i]] + " " * (cols[i] - 2)) if i < len(r.groups)
                         else " " * cols[i])
        lines.append(f"{str(r.stage).ljust(5)}  {str(r.partition).ljust(9)}  "
                     f"{str(r.replicas).ljust(8)}  {' '.join(cells)}  "
                     f"{_available(r.available, replicas, paint)}  {r.description}")
    return lines


async def _simulate(session: Session, args: argparse.Namespace, live: dict[str, Any],
                    view: LeaderWorkerSetView, changed: str | None, refused: str | None,
                    data: dict[str, Any],
                    ) -> tuple[Preview | HashPreview | None, str | None]:
    """The simulated rollout (None where there is none) and the note to show with it; what it
    adds to the ``-o`` data goes into ``data``. Nothing is simulated for a change admission
    would refuse."""
    if refused:
        return None, f"admission would refuse this change: {refused}"
    if view.hashed:
        return await _simulate_hash(session, args, live, view, changed, data)
    return await _simulate_ordinal(session, args, live, view, changed, data)


async def _simulate_hash(session: Session, args: argparse.Namespace, live: dict[str, Any],
                         view: LeaderWorkerSetView, changed: str | None, data: dict[str, Any],
                         ) -> tuple[HashPreview | None, str | None]:
    """Hash groups: the leader Deployment paces the rollout, simulated from the live groups."""
    data["groupReplacementPolicy"] = view.group_replacement_policy
    deployment = await session.kube.get(
        f"/apis/apps/v1/namespaces/{session.namespace}/deployments/{args.name}")
    if deployment is None:
        return None, "the set has no leader Deployment yet: nothing to simulate from"
    try:
        preview = preview_hash_rollout(HashPreviewInput(
            name=args.name, replicas=view.replicas,
            max_unavailable=view.rolling_update.max_unavailable,
            max_surge=view.rolling_update.max_surge,
            policy=view.group_replacement_policy,
            template_changed=changed is not None,
            groups=await live_hash_groups(session, live, deployment)))
    except HashPreviewError as exc:
        return None, str(exc)
    data.update(hash_preview_data(preview))
    return preview, ("Hash group identity: the leader Deployment paces the rollout "
                     f"(maxSurge {preview.max_surge}, maxUnavailable "
                     f"{preview.max_unavailable}, groupReplacementPolicy "
                     f"{view.group_replacement_policy}); G-n stand for the random "
                     "keys of groups the rollout creates")


async def _simulate_ordinal(session: Session, args: argparse.Namespace,
                            live: dict[str, Any], view: LeaderWorkerSetView,
                            changed: str | None, data: dict[str, Any],
                            ) -> tuple[Preview | None, str | None]:
    """Ordinal groups: the controller's own pacing, pass after pass, from the leader
    StatefulSet and the live groups."""
    sts = await session.kube.get(
        f"/apis/apps/v1/namespaces/{session.namespace}/statefulsets/{args.name}")
    if sts is None:
        return None, "the set has no leader StatefulSet yet: nothing to simulate from"
    sts_view = StatefulSetView.of(sts)
    config = view.rolling_update
    preview = preview_rollout(PreviewInput(
        name=args.name, replicas=view.replicas, partition=config.partition,
        max_unavailable=config.max_unavailable, max_surge=config.max_surge,
        size=view.size, template_changed=changed is not None,
        leader_sts=LeaderStatefulSetState(sts_view.replicas, sts_view.partition,
                                          sts_view.replicas_annotation),
        groups=await live_groups(session, live, sts)), order=args.ready_order)
    data.update(preview_data(preview))
    return preview, None


async def _plan_ds(session: Session, args: argparse.Namespace, images: list[ImageChange],
                   manifest: dict[str, Any] | None) -> int:
    """NAME is no LeaderWorkerSet: a DisaggregatedSet's plan (``plugin.plan_ds``), or not
    found."""
    from lws_operator.plugin.disaggregated import ds_path
    from lws_operator.plugin.plan_ds import plan_ds

    live = await session.kube.get(ds_path(session.namespace, args.name))
    if live is None:
        print(f'Error: leaderworkerset or disaggregatedset "{args.name}" not found in namespace '
              f'"{session.namespace}"', file=sys.stderr)
        return 1
    return await plan_ds(session.kube, live, args, images, manifest)


async def run(session: Session, args: argparse.Namespace) -> int:
    out = sys.stdout
    try:
        images = [parse_image(text) for text in args.set_image]
        manifest = load_manifest(args.filename) if args.filename else None
    except (ChangeError, OSError, yaml.YAMLError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    ns = session.namespace
    try:
        live = await session.kube.get(lws_path(ns, args.name))
        if live is None:
            return await _plan_ds(session, args, images, manifest)
        if manifest is None and not images and args.replicas is None and args.size is None:
            print("Error: nothing to plan: give -f, --set-image, --replicas or --size",
                  file=sys.stderr)
            return 2
        try:
            new = proposed(live, manifest=manifest, images=images, replicas=args.replicas,
                           size=args.size)
        except ChangeError as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 2
        view, before = lws_view(new), lws_view(live)
        refused = refusal(live, new)
        changed = template_change(live, new)
        data: dict[str, Any] = {
            "namespace": ns, "name": args.name, "groupIdentity": view.group_identity,
            "rollout": changed is not None, "templateDifference": changed,
            "refusedByAdmission": refused,
            "replicas": {"from": before.replicas, "to": view.replicas},
            "size": {"from": before.size, "to": view.size},
            "maxUnavailable": view.rolling_update.max_unavailable,
            "maxSurge": view.rolling_update.max_surge,
            "partition": view.rolling_update.partition, "readyOrder": args.ready_order,
            "steps": None}
        preview, note = await _simulate(session, args, live, view, changed, refused, data)
        data["note"] = note
    except ApiException as exc:
        print(f"Error: {exc.status} {exc.reason}", file=sys.stderr)
        return 1
    if args.output:
        out.write(dump(data, args.output))
        return 0
    out.write("\n".join(summary(data, preview, Paint(colour_enabled(out)))) + "\n")
    return 0


def _completes(preview: Preview | HashPreview, data: Mapping[str, Any]) -> str:
    """The last line of a simulation that completes, either kind."""
    return (f"Complete after {len(preview.rows) - 1} steps; at least {preview.min_available} "
            f"of {data['replicas']['to']} groups available throughout.")


def summary(data: Mapping[str, Any], preview: Preview | HashPreview | None,
            paint: Paint) -> list[str]:
    name = f"{data['namespace']}/{data['name']}"
    lines = []
    scale = (f"replicas {data['replicas']['from']} → {data['replicas']['to']}"
             if data["replicas"]["from"] != data["replicas"]["to"] else None)
    if data["rollout"]:
        lines.append(f"{paint('Rolling update', 'bold')} of {name}: the templates change "
                     f"(first difference: {data['templateDifference']}), so every group "
                     "is replaced" + (f"; {scale}" if scale else "") + ".")
    else:
        lines.append(f"{paint('No rollout', 'bold')} for {name}: the templates are "
                     "unchanged, no group is replaced"
                     + (f" ({scale}: groups are added or removed)." if scale else "."))
    if isinstance(preview, HashPreview):
        lines.append(f"maxUnavailable {data['maxUnavailable']}, maxSurge {data['maxSurge']}, "
                     f"groupReplacementPolicy {data['groupReplacementPolicy']}. "
                     "Nothing was written.")
    else:
        lines.append(f"maxUnavailable {data['maxUnavailable']}, maxSurge "
                     f"{data['maxSurge']}, partition {data['partition']}; readiness order: "
                     f"{data['readyOrder']}. Nothing was written.")
    if data.get("note"):
        lines.append(f"Note: {data['note']}.")
    if isinstance(preview, HashPreview):
        lines.append("")
        lines += hash_table(preview, int(data["replicas"]["to"]), paint)
        lines.append("")
        if preview.complete:
            lines.append(_completes(preview, data))
        else:
            lines.append(paint("Does not complete on its own: a group not Ready now holds "
                               "it (see `kubectl lws why`).", "yellow"))
    elif preview is not None:
        lines.append("")
        lines += table(preview, int(data["replicas"]["to"]), paint)
        lines.append("")
        if preview.error:
            lines.append(paint(f"The simulation stopped: {preview.error}", "red"))
        elif preview.complete:
            lines.append(_completes(preview, data))
        else:
            lines.append(paint("Does not complete on its own: groups below the partition, "
                               "or not Ready now, hold it (see `kubectl lws why`).", "yellow"))
    return lines
