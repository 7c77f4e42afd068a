"""``kubectl lws rollout history NAME [--revision=N]``: the revisions lws-operator keeps of a
LeaderWorkerSet, as ``kubectl rollout history`` lists a Deployment's.

The shell half: read the set and its ControllerRevisions, hand them to
``lws_operator.plugin.analysis.revision_history``, print. A DisaggregatedSet keeps no history
(its drained revisions' LeaderWorkerSets are deleted), and the command says so.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api.constants import (
    CHANGE_CAUSE_ANNOTATION,
    FULLY_READY_ANNOTATION,
    NAME_LABEL,
    REVISION_HISTORY_LIMIT_ANNOTATION,
)
from lws_operator.kube.client import KubeClient, status_message
from lws_operator.logic.identity import history
from lws_operator.plugin.analysis import revision_history as rh
from lws_operator.plugin.output import add_output_option, dump
from lws_operator.plugin.rollout.target import Ambiguous, NotFound, Target, resolve

if TYPE_CHECKING:
    from lws_operator.plugin.cli import Session

EXIT_OK, EXIT_FAILED = 0, 1

DESCRIPTION = f"""\
List the revisions lws-operator keeps of a LeaderWorkerSet, oldest first: each one's number
(a revision made current again by an undo is renumbered above the others, as a Deployment's),
template hash, creation time, whether the set was ever fully Ready on it (every group updated
and Ready; the time it first was) and its change cause ({CHANGE_CAUSE_ANNOTATION} of the set,
copied onto the revision). With --revision, that revision's templates.

The set keeps the current revision and up to {history.history_limit({})} others, or as many
as its {REVISION_HISTORY_LIMIT_ANNOTATION} annotation says. Revisions
made by the upstream controller, or by lws-operator before it kept history, record no
readiness ({FULLY_READY_ANNOTATION}); the upstream controller keeps only the current and
the update revision. DisaggregatedSets keep no revision history."""

EPILOG = """\
examples:
  kubectl lws rollout history my-llm
  kubectl lws rollout history my-llm --revision=3            the templates of revision 3
  kubectl lws rollout history my-llm -o json | jq '.[] | select(.everFullyReady)'"""

NO_DS_HISTORY = (
    'DisaggregatedSet "{name}" keeps no revision history: a coordinated rollout deletes the '
    "LeaderWorkerSets of the revision it drained, so there is nothing to list or go back to. "
    "Put the earlier spec.roles back (e.g. from version control) to roll back; `kubectl lws "
    "rollout history` works on each role's LeaderWorkerSet, which keeps its own.")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "history", help="the revisions of a LeaderWorkerSet, with cause and readiness",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", metavar="NAME", help="the LeaderWorkerSet")
    parser.add_argument("--revision", type=int, default=0, metavar="N",
                        help="show the templates of revision N")
    add_output_option(parser)
    parser.set_defaults(run=run)


def revisions_path(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions"


async def revisions_of(kube: KubeClient, namespace: str, name: str) -> list[Mapping[str, Any]]:
    """The ControllerRevisions labelled with the set's name (``analysis.revision_history.owned``
    keeps those the set controls)."""
    answer = await kube.request("GET", revisions_path(namespace),
                                query={"labelSelector": f"{NAME_LABEL}={name}"})
    return list(answer.get("items") or [])


async def leaderworkerset(session: Session, args: argparse.Namespace) -> Target | None:
    """The LeaderWorkerSet NAME names; None (the reason printed) when it is missing, ambiguous
    or a DisaggregatedSet."""
    try:
        found = await resolve(session.kube, session.namespace, args.name, args.kind)
    except (NotFound, Ambiguous) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    if found.kind == "disaggregatedset":
        print(f"error: {NO_DS_HISTORY.format(name=args.name)}", file=sys.stderr)
        return None
    return found


async def run(session: Session, args: argparse.Namespace) -> int:
    try:
        found = await leaderworkerset(session, args)
        if found is None:
            return EXIT_FAILED
        revisions = await revisions_of(session.kube, session.namespace, args.name)
    except ApiException as exc:
        print(f"error: {status_message(exc)}", file=sys.stderr)
        return EXIT_FAILED
    if args.revision:
        mine = rh.owned(found.body, revisions)
        chosen = next((r for r in mine if history.number(r) == args.revision), None)
        if chosen is None:
            print(f"error: revision {args.revision} of LeaderWorkerSet \"{args.name}\" does not "
                  f"exist; revisions kept: "
                  f"{', '.join(str(history.number(r)) for r in reversed(mine)) or 'none'}",
                  file=sys.stderr)
            return EXIT_FAILED
        row = next(r for r in rh.rows(found.body, [chosen]))
        data = {**row.as_data(), **rh.templates(chosen)}
        print(dump(data, args.output or "yaml"), end="")
        return EXIT_OK
    entries = rh.rows(found.body, revisions)
    if args.output:
        print(dump([e.as_data() for e in entries], args.output), end="")
    elif not entries:
        print(f'No revisions found for LeaderWorkerSet "{args.name}".')
    else:
        print(f"leaderworkerset.leaderworkerset.x-k8s.io/{args.name}")
        print(rh.table(entries), end="")
    return EXIT_OK
