"""``kubectl lws rollout history NAME [--revision=N]``: the revisions lws-operator keeps of a
LeaderWorkerSet or a DisaggregatedSet, as ``kubectl rollout history`` lists a Deployment's.

The shell half: read the set and its ControllerRevisions (selected by the kind's name label),
hand them to ``lws_operator.plugin.analysis.revision_history`` (a LeaderWorkerSet's) or
``ds_history`` (a DisaggregatedSet's), print.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api import disaggregated as ds_api
from lws_operator.api.constants import (
    CHANGE_CAUSE_ANNOTATION,
    FULLY_READY_ANNOTATION,
    NAME_LABEL,
    REVISION_HISTORY_LIMIT_ANNOTATION,
)
from lws_operator.kube.client import KubeClient, status_message
from lws_operator.logic.disaggregated import revision_data
from lws_operator.logic.identity import history
from lws_operator.plugin.analysis import ds_history
from lws_operator.plugin.analysis import revision_history as rh
from lws_operator.plugin.output import add_output_option, dump
from lws_operator.plugin.rollout.pause import resource
from lws_operator.plugin.rollout.target import Ambiguous, NotFound, Target, resolve

if TYPE_CHECKING:
    from lws_operator.plugin.cli import Session

EXIT_OK, EXIT_FAILED = 0, 1

DESCRIPTION = f"""\
List the revisions lws-operator keeps of a LeaderWorkerSet or a DisaggregatedSet, oldest
first: each one's number
(a revision made current again by an undo is renumbered above the others, as a Deployment's),
template hash, creation time, whether the set was ever fully Ready on it (every group updated
and Ready; the time it first was) and its change cause ({CHANGE_CAUSE_ANNOTATION} of the set,
copied onto the revision). With --revision, that revision's templates (a DisaggregatedSet's:
each role's leaderWorkerTemplate).

The set keeps the current revision and up to {history.history_limit({})} others, or as many
as its {REVISION_HISTORY_LIMIT_ANNOTATION} annotation says. Revisions
made by the upstream controller, or by lws-operator before it kept history, record no
readiness ({FULLY_READY_ANNOTATION}); the upstream controller keeps only the current and
the update revision. A DisaggregatedSet's history starts with the revision it ran when an
lws-operator that keeps it first saw the set."""

EPILOG = """\
examples:
  kubectl lws rollout history my-llm
  kubectl lws rollout history my-llm --revision=3            the templates of revision 3
  kubectl lws rollout history my-llm -o json | jq '.[] | select(.everFullyReady)'"""

# How each kind's revisions are found and named in messages.
KIND_NAME = {"leaderworkerset": "LeaderWorkerSet", "disaggregatedset": ds_api.KIND}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "history", help="the revisions of a set, with cause and readiness",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", metavar="NAME",
                        help="the LeaderWorkerSet or DisaggregatedSet")
    parser.add_argument("--revision", type=int, default=0, metavar="N",
                        help="show the templates of revision N")
    add_output_option(parser)
    parser.set_defaults(run=run)


def revisions_path(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions"


async def revisions_of(kube: KubeClient, namespace: str, name: str,
                       selector: str | None = None) -> list[Mapping[str, Any]]:
    """The ControllerRevisions labelled with the set's name (``selector``: a
    DisaggregatedSet's, ``logic.disaggregated.revision_data.selector``; the analysis keeps
    those the set controls)."""
    answer = await kube.request("GET", revisions_path(namespace),
                                query={"labelSelector": selector or f"{NAME_LABEL}={name}"})
    return list(answer.get("items") or [])


async def find_set(session: Session, args: argparse.Namespace) -> Target | None:
    """The set NAME names; None (the reason printed) when it is missing or ambiguous."""
    try:
        return await resolve(session.kube, session.namespace, args.name, args.kind)
    except (NotFound, Ambiguous) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


async def set_and_revisions(session: Session, args: argparse.Namespace,
                            ) -> tuple[Target, list[Mapping[str, Any]]] | None:
    """The set NAME names and the ControllerRevisions carrying its name label."""
    found = await find_set(session, args)
    if found is None:
        return None
    selector = revision_data.selector(args.name) if found.kind == "disaggregatedset" else None
    return found, await revisions_of(session.kube, session.namespace, args.name, selector)


def owned(found: Target, revisions: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The set's own revisions, newest first."""
    if found.kind == "disaggregatedset":
        return ds_history.owned(found.body, revisions)
    return rh.owned(found.body, revisions)


def rows(found: Target, revisions: list[Mapping[str, Any]]) -> list[rh.Row]:
    if found.kind == "disaggregatedset":
        return ds_history.rows(found.body, revisions)
    return rh.rows(found.body, revisions)


def stored(found: Target, revision: Mapping[str, Any]) -> dict[str, Any]:
    """What ``--revision=N`` shows of a revision beside its row."""
    if found.kind == "disaggregatedset":
        return ds_history.roles(revision)
    return rh.templates(revision)


async def run(session: Session, args: argparse.Namespace) -> int:
    try:
        got = await set_and_revisions(session, args)
    except ApiException as exc:
        print(f"error: {status_message(exc)}", file=sys.stderr)
        return EXIT_FAILED
    if got is None:
        return EXIT_FAILED
    found, revisions = got
    kind = KIND_NAME[found.kind]
    if args.revision:
        mine = owned(found, revisions)
        chosen = next((r for r in mine if history.number(r) == args.revision), None)
        if chosen is None:
            print(f"error: revision {args.revision} of {kind} \"{args.name}\" does not "
                  f"exist; revisions kept: "
                  f"{', '.join(str(history.number(r)) for r in reversed(mine)) or 'none'}",
                  file=sys.stderr)
            return EXIT_FAILED
        row = next(r for r in rows(found, [chosen]) if r.number == args.revision)
        data = {**row.as_data(), **stored(found, chosen)}
        print(dump(data, args.output or "yaml"), end="")
        return EXIT_OK
    entries = rows(found, revisions)
    if args.output:
        print(dump([e.as_data() for e in entries], args.output), end="")
    elif not entries:
        print(f'No revisions found for {kind} "{args.name}".')
    else:
        print(resource(found.kind, args.name))
        print(rh.table(entries), end="")
    return EXIT_OK
