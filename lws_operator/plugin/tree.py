"""``kubectl lws tree``: LeaderWorkerSet → groups → pods, or DisaggregatedSet → its
LeaderWorkerSets → groups → pods, once or live.

The model is ``lws_operator.plugin.analysis.group_tree``'s; this module reads the objects and draws
it. ``--watch`` polls about once a second and redraws when the picture changed. Polling rather than
the watch API: the tree is one consistent picture of three kinds (the set, its pods, its leader
StatefulSet or Deployment), which a watch would have to rebuild from three merged streams after
the same initial LISTs; a person reads one redraw a second, and a LIST narrowed by a label
selector is cheap for the API server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api.constants import API_VERSION, NAME_LABEL, PLURAL
from lws_operator.api.disaggregated import DisaggregatedSetView, controlled_by
from lws_operator.api.view import lws_view
from lws_operator.plugin.analysis.ds_tree import DsNode, ds_tree_data
from lws_operator.plugin.analysis.group_tree import (
    EXHAUSTED,
    NOT_READY,
    READY,
    TERMINATING,
    GroupNode,
    PodNode,
    SetNode,
    build_tree,
    tree_data,
)
from lws_operator.plugin.cli import Session
from lws_operator.plugin.disaggregated import list_sets
from lws_operator.plugin.disaggregated import read_tree as read_ds_tree
from lws_operator.plugin.output import Paint, add_output_option, colour_enabled, dump
from lws_operator.plugin.rollout.target import KINDS, Ambiguous, Kind, NotFound, resolve

HELP = "show LeaderWorkerSets as set → groups → pods (DisaggregatedSets: → role sets)"
DESCRIPTION = """\
Show a LeaderWorkerSet the way its users think of it: the set, each group (replica) with its
state and revision, and each group's pods with their node, readiness, template revision,
container restarts and subgroup. Hash group identity shows each group's key. With no NAME,
every LeaderWorkerSet and DisaggregatedSet in the namespace (or, with -A, in every namespace).

A DisaggregatedSet is drawn as the set (each role's ready groups, its target revision and
conditions), then each child LeaderWorkerSet it controls (role, slice, revision; an old
revision's in colour while a rollout replaces it) with its own tree, then the per-role
Services. Its children are not drawn again on their own.

Group states: Ready (every pod running and ready), NotReady, Terminating (the leader is being
deleted), RestartBudgetExhausted (stopped after maxGroupRestarts, a feature of lws-operator
only: recover it with `kubectl lws recover`). A revision shown in colour differs from the set's
current one (the group is not updated yet).

Colour is used when stdout is a terminal and NO_COLOR is unset."""
EPILOG = """\
examples:
  kubectl lws tree my-set                 the tree of one set
  kubectl lws tree my-disaggregated-set   a DisaggregatedSet: its roles' sets and Services
  kubectl lws tree -A                     every set in every namespace
  kubectl lws tree my-set --watch         redraw about once a second until Ctrl-C
  kubectl lws tree my-set -o json         the same model as data
  kubectl lws tree my-set -o json | jq '.groups[] | select(.state != "Ready") | .index'"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tree", help=HELP, description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", metavar="NAME",
                        help="the LeaderWorkerSet or DisaggregatedSet (default: every one "
                        "of both kinds in scope)")
    parser.add_argument("--kind", choices=KINDS, default=None,
                        help="the kind NAME is (default: whichever exists; both is an error)")
    parser.add_argument("-w", "--watch", action="store_true",
                        help="redraw when anything changes (polled about once a second) "
                        "until Ctrl-C")
    add_output_option(parser)
    parser.set_defaults(run=run)


def lws_path(namespace: str | None, name: str | None = None) -> str:
    base = f"/apis/{API_VERSION}"
    path = f"{base}/namespaces/{namespace}/{PLURAL}" if namespace else f"{base}/{PLURAL}"
    return f"{path}/{name}" if name else path


def pods_path(namespace: str | None) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"


async def leader_workload(session: Session, lws: Mapping[str, Any]) -> dict[str, Any] | None:
    """The set's leader StatefulSet (Ordinal) or Deployment (Hash), named after it."""
    view = lws_view(lws)
    kind = "deployments" if view.hashed else "statefulsets"
    return await session.kube.get(
        f"/apis/apps/v1/namespaces/{view.namespace}/{kind}/{view.name}")


Node = SetNode | DsNode


async def read_trees(session: Session, name: str | None, kind: Kind | None = None,
                     ) -> list[Node]:
    """The trees of ``name`` (in the session's namespace; a LeaderWorkerSet or a
    DisaggregatedSet, ``target.resolve`` says which) or of every set of either kind in scope:
    a DisaggregatedSet's children are drawn inside it, not again on their own. Raises
    ``target.NotFound`` or ``target.Ambiguous``."""
    namespace = None if session.all_namespaces and name is None else session.namespace
    disaggregated: list[dict[str, Any]] = []
    if name is not None:
        found = await resolve(session.kube, session.namespace, name, kind)
        if found.kind == "disaggregatedset":
            return [await read_ds_tree(session.kube, found.body)]
        sets = [found.body]
        selector = f"{NAME_LABEL}={name}"
    else:
        disaggregated = await list_sets(session.kube, namespace)
        drawn = {DisaggregatedSetView.of(d).uid for d in disaggregated}
        sets = [s for s in (await session.kube.request("GET", lws_path(namespace))).get(
            "items") or [] if not any(controlled_by(s, uid) for uid in drawn)]
        selector = NAME_LABEL
    pods = (await session.kube.request(
        "GET", pods_path(namespace), query={"labelSelector": selector})).get("items") or []
    by_set: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace")), str((meta.get("labels") or {}).get(NAME_LABEL)))
        by_set.setdefault(key, []).append(pod)
    workloads = await asyncio.gather(*(leader_workload(session, s) for s in sets))
    trees: list[Node] = [build_tree(s, by_set.get(lws_view(s).key, []), w)
                         for s, w in zip(sets, workloads, strict=True)]
    trees += await asyncio.gather(*(read_ds_tree(session.kube, d) for d in disaggregated))
    return sorted(trees, key=lambda t: (t.namespace, t.name))


# ------------------------------------------------------------------------------ drawing

_STATE_STYLE = {READY: "green", NOT_READY: "yellow", TERMINATING: "dim", EXHAUSTED: "red"}


def short(revision: str) -> str:
    return revision or "-"


def pod_status(pod: PodNode) -> str:
    if pod.terminating:
        return "Terminating"
    if pod.gated:
        return "SchedulingGated"
    if pod.ready:
        return "Ready"
    return "NotReady" if pod.phase == "Running" else pod.phase


def _pod_cells(pod: PodNode) -> list[str]:
    cells = [pod.name, pod.role, f"node {pod.node or '-'}", pod_status(pod),
             f"revision {short(pod.revision)}", f"restarts {pod.restarts}"]
    if pod.subgroup is not None:
        cells.append(f"subgroup {pod.subgroup}")
    return cells


def _pod_style(pod: PodNode) -> str:
    status = pod_status(pod)
    return {"Ready": "green", "Terminating": "dim", "Failed": "red"}.get(status, "yellow")


def set_header(tree: SetNode, paint: Paint) -> str:
    ready = f"ready {tree.ready_replicas}/{tree.replicas}"
    style = "green" if tree.ready_replicas >= tree.replicas else "yellow"
    conditions = " ".join(f"{t}={s}" for t, s in sorted(tree.conditions.items()))
    return (f"{paint('LeaderWorkerSet', 'bold')} {tree.namespace}/{tree.name}  "
            f"({tree.group_identity}; replicas {tree.replicas}, size {tree.size}; "
            f"{paint(ready, style)}, updated {tree.updated_replicas}; "
            f"revision {short(tree.revision)})" + (f"  {conditions}" if conditions else ""))


def group_header(group: GroupNode, tree: SetNode, paint: Paint) -> str:
    revision = f"revision {short(group.revision)}"
    if tree.revision and not group.updated:
        revision = paint(revision + " (not updated)", "magenta")
    text = f"group {paint(group.index, 'bold')}  {paint(group.state, _STATE_STYLE[group.state])}"
    text += f"  {revision}"
    if group.key:
        text += f"  key {group.key}"
    return text


def render(tree: SetNode, paint: Paint) -> list[str]:
    """The tree's lines: the set, then each group, then each pod in aligned columns."""
    lines = [set_header(tree, paint)]
    rows = [_pod_cells(p) for g in tree.groups for p in g.pods]
    widths = [max((len(r[i]) for r in rows if len(r) > i), default=0)
              for i in range(max((len(r) for r in rows), default=0))]
    if not tree.groups:
        lines.append("└── (no pods)")
    for gi, group in enumerate(tree.groups):
        last_group = gi == len(tree.groups) - 1
        lines.append(f"{'└' if last_group else '├'}── {group_header(group, tree, paint)}")
        indent = " " if last_group else "│"
        for pi, pod in enumerate(group.pods):
            cells = _pod_cells(pod)
            padded = [c.ljust(widths[i]) for i, c in enumerate(cells)]
            padded[3] = paint(padded[3], _pod_style(pod))
            if tree.revision and pod.revision != tree.revision:
                padded[4] = paint(padded[4], "magenta")
            branch = "└" if pi == len(group.pods) - 1 else "├"
            lines.append(f"{indent}   {branch}── " + "  ".join(padded).rstrip())
    return lines


def render_ds(node: DsNode, paint: Paint) -> list[str]:
    """A DisaggregatedSet's lines: the set, then each child LeaderWorkerSet (role, slice,
    revision) with its own tree beneath, then the Services."""
    conditions = " ".join(f"{t}={s}" for t, s in sorted(node.conditions.items()))
    counts = {str(e.get("name")): e for e in node.role_statuses}
    roles = ", ".join(f"{r} ready {int(counts.get(r, {}).get('readyReplicas') or 0)}/"
                      f"{int(counts.get(r, {}).get('replicas') or 0)}" for r in node.roles)
    lines = [f"{paint('DisaggregatedSet', 'bold')} {node.namespace}/{node.name}  (roles "
             f"{roles}; slices {node.slices}; revision {short(node.revision)})"
             + (f"  {conditions}" if conditions else "")]
    rows: list[tuple[str, list[str]]] = []
    for child in node.children:
        revision = f"revision {child.revision}"
        if not child.current:
            revision = paint(revision + " (old)", "magenta")
        sub = render(child.tree, paint)
        rows.append((f"role {paint(child.role, 'bold')}  slice {child.slice}  {revision}: "
                     f"{sub[0]}", sub[1:]))
    rows += [(f"Service {s.name}  (headless; role {s.role}, revision {s.revision})", [])
             for s in node.services]
    if not rows:
        lines.append("└── (no LeaderWorkerSets)")
    for i, (head, body) in enumerate(rows):
        last = i == len(rows) - 1
        lines.append(f"{'└' if last else '├'}── {head}")
        lines += [f"{' ' if last else '│'}   {line}" for line in body]
    return lines


def render_node(node: Node, paint: Paint) -> list[str]:
    return render_ds(node, paint) if isinstance(node, DsNode) else render(node, paint)


def render_all(trees: Sequence[Node], paint: Paint) -> str:
    if not trees:
        return "No LeaderWorkerSets or DisaggregatedSets found.\n"
    return "\n\n".join("\n".join(render_node(t, paint)) for t in trees) + "\n"


def node_data(node: Node) -> dict[str, Any]:
    return ds_tree_data(node) if isinstance(node, DsNode) else tree_data(node)


def as_data(trees: Sequence[Node], single: bool) -> Any:
    """One set's model, or ``{"items": [...]}`` for every set in scope (like kubectl get; a
    DisaggregatedSet's says ``kind: DisaggregatedSet``)."""
    if single:
        return node_data(trees[0])
    return {"items": [node_data(t) for t in trees]}


def draw(trees: Sequence[Node], args: argparse.Namespace, out: TextIO) -> str:
    if args.output:
        return dump(as_data(trees, args.name is not None), args.output)
    return render_all(trees, Paint(colour_enabled(out)))


async def run(session: Session, args: argparse.Namespace) -> int:
    out = sys.stdout
    try:
        trees = await read_trees(session, args.name, args.kind)
    except (NotFound, Ambiguous) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, NotFound) else 2
    except ApiException as exc:
        print(f"Error: {exc.status} {exc.reason}", file=sys.stderr)
        return 1
    text = draw(trees, args, out)
    out.write(text)
    out.flush()
    if not args.watch:
        return 0
    return await _watch(session, args, out, text)


async def _watch(session: Session, args: argparse.Namespace, out: TextIO, text: str) -> int:
    """Read and draw again every second, writing only a tree that changed, until the set is
    deleted (1) or the user interrupts; a failed read (the API server away for a moment) is
    said and retried."""
    terminal = out.isatty() and not args.output
    while True:
        await asyncio.sleep(1.0)
        try:
            trees = await read_trees(session, args.name, args.kind)
        except NotFound as exc:  # deleted while watched
            print(f"Error: {exc}", file=sys.stderr)
            return 1
        except (ApiException, OSError) as exc:  # the API server away for a moment: go on
            print(f"Warning: {exc}; retrying", file=sys.stderr)
            continue
        drawn = draw(trees, args, out)
        if drawn == text:
            continue
        text = drawn
        separator = _separator(args, terminal)
        if separator:
            out.write(separator)
        out.write(text)
        out.flush()


def _separator(args: argparse.Namespace, terminal: bool) -> str:
    """What goes before a redrawn tree: on a terminal, home and clear (a redraw in place);
    otherwise a YAML document start, or a blank line between text trees (none between JSON
    documents)."""
    if terminal:
        return "\x1b[H\x1b[2J"
    if args.output == "yaml":
        return "---\n"
    return "" if args.output else "\n"
