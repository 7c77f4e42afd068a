"""``kubectl lws rollout undo NAME [--to-revision=N]``: write an earlier revision's templates back
onto a LeaderWorkerSet or a DisaggregatedSet, as ``kubectl rollout undo`` does for a Deployment.

The write is one merge patch guarded by the resourceVersion read: a LeaderWorkerSet's
``leaderWorkerTemplate`` and ``networkConfig`` as the revision stores them
(``lws_operator.plugin.analysis.revision_history.undo_patch``), so the controller rolls the groups
to them like any template change (maxUnavailable, maxSurge, the progress deadline all apply); a
DisaggregatedSet's ``spec.roles`` with the revision's roles written back
(``lws_operator.plugin.analysis.ds_history.undo_patch``), which its controller rolls out as a
coordinated rollout like any other. Like kubectl, it asks no confirmation.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from kubernetes.aio.client.exceptions import ApiException

from lws_operator.kube.client import status_message
from lws_operator.logic.identity import history
from lws_operator.plugin.analysis import ds_history
from lws_operator.plugin.analysis import revision_history as rh
from lws_operator.plugin.rollout.history import KIND_NAME, set_and_revisions
from lws_operator.plugin.rollout.pause import resource

if TYPE_CHECKING:
    from lws_operator.plugin.cli import Session

EXIT_OK, EXIT_FAILED = 0, 1
MERGE_PATCH = "application/merge-patch+json"

DESCRIPTION = """\
Roll a LeaderWorkerSet or a DisaggregatedSet back to an earlier revision: the templates that
revision stores are written back onto the set, which the controller then rolls out like any
template change. A LeaderWorkerSet gets its leader and worker templates and network
configuration back; a DisaggregatedSet its roles as they were (names, order, each role's
leaderWorkerTemplate and immutable fields), each role keeping its replicas, scaling and
rollout strategy, and its controller runs a coordinated rollout to them. Without
--to-revision, the previous revision: the highest-numbered one whose templates are not the
set's now. The set's change cause becomes the revision's. `kubectl lws rollout history NAME`
lists the revisions kept.

A revision pruned beyond the history limit (or never made) is refused, naming the ones kept.
The write is refused, not retried, when the set changed since it was read: run it again."""

EPILOG = """\
examples:
  kubectl lws rollout undo my-llm                     back to the previous revision
  kubectl lws rollout undo my-llm --to-revision=3
  kubectl lws rollout undo my-llm --dry-run           say where it would go, write nothing"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "undo", help="put a set's templates back to an earlier revision",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", metavar="NAME",
                        help="the LeaderWorkerSet or DisaggregatedSet")
    parser.add_argument("--to-revision", type=int, default=0, metavar="N",
                        help="the revision to go back to (default: the previous one)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the revision it would go to, write nothing")
    parser.set_defaults(run=run)


async def run(session: Session, args: argparse.Namespace) -> int:
    name = args.name
    kind = KIND_NAME.get(args.kind or "", "set")
    try:
        got = await set_and_revisions(session, args)
        if got is None:
            return EXIT_FAILED
        found, revisions = got
        kind, where = KIND_NAME[found.kind], resource(found.kind, name)
        analysis = ds_history if found.kind == "disaggregatedset" else rh
        try:
            choice = analysis.undo_target(found.body, revisions, args.to_revision or None)
        except rh.NoSuchRevision as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        number = history.number(choice.target)
        if choice.already:
            print(f"{where} skipped rollback (the set runs revision {number} already)")
            return EXIT_OK
        if args.dry_run:
            print(f"{where} would roll back to revision {number} (dry run)")
            return EXIT_OK
        await session.kube.request("PATCH", found.path,
                                   body=analysis.undo_patch(found.body, choice.target),
                                   content_type=MERGE_PATCH)
    except ApiException as exc:
        if exc.status == 409:
            print(f'error: {kind} "{name}" changed while the undo was prepared; '
                  "nothing was written, run it again", file=sys.stderr)
        else:
            print(f"error: {status_message(exc)}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{where} rolled back to revision {number}")
    return EXIT_OK
