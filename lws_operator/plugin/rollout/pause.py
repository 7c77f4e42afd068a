"""``kubectl lws rollout pause NAME`` and ``kubectl lws rollout resume NAME``: hold a set's
rollout where it stands and let it go on, as ``kubectl rollout pause|resume`` do a Deployment's.

Both write one merge patch of the set's ``lws-operator.dev/paused`` annotation (pause sets it to
``"true"``, resume removes it), so they work on a LeaderWorkerSet and a DisaggregatedSet alike
(``target.resolve``) and need no permission beyond patching the set. What a paused set does is
the controller's (docs/controller.md, "Pausing a rollout"). As kubectl does, pausing a set
already paused, or resuming one that is not, is an error that writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api import constants as lws
from lws_operator.api import disaggregated as ds
from lws_operator.api.constants import PAUSED_ANNOTATION
from lws_operator.api.view import paused
from lws_operator.plugin.rollout.target import Ambiguous, Kind, NotFound, resolve

if TYPE_CHECKING:
    from lws_operator.plugin.cli import Session

EXIT_OK, EXIT_FAILED = 0, 1
MERGE_PATCH = "application/merge-patch+json"

PAUSE_DESCRIPTION = f"""\
Pause the rollout of a LeaderWorkerSet or DisaggregatedSet: annotate it with
{PAUSED_ANNOTATION}=true. The rollout holds where it stands: no further group is replaced or
surged (a DisaggregatedSet holds every role at its current step), a template changed while
paused starts nowhere, and a scale of spec.replicas is still followed (new groups start on the
revision already running). The progress deadline does not run while paused.
`kubectl lws why NAME` names the pause; `kubectl lws rollout resume NAME` lets the rollout go
on. Works with lws-operator only: the upstream controller ignores the annotation."""
PAUSE_EPILOG = """\
examples:
  kubectl lws rollout pause my-llm          hold the rollout, look at the upgraded groups
  kubectl lws tree my-llm                   which groups run which revision
  kubectl lws rollout resume my-llm         let it go on"""
RESUME_DESCRIPTION = f"""\
Resume a paused rollout: remove the {PAUSED_ANNOTATION} annotation. The rollout goes on from
where it was held (or starts, for a template changed while paused), and the progress deadline
counts from now."""
RESUME_EPILOG = """\
examples:
  kubectl lws rollout resume my-llm
  kubectl lws rollout resume my-ds --kind disaggregatedset"""


def register(subparsers: Any) -> None:
    for name, help_text, description, epilog, pause in (
            ("pause", "hold a set's rollout where it stands", PAUSE_DESCRIPTION, PAUSE_EPILOG,
             True),
            ("resume", "resume a paused rollout", RESUME_DESCRIPTION, RESUME_EPILOG, False)):
        parser = subparsers.add_parser(
            name, help=help_text, description=description, epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("name", metavar="NAME",
                            help="the LeaderWorkerSet or DisaggregatedSet")
        parser.set_defaults(run=run_pause if pause else run_resume)


def resource(kind: Kind, name: str) -> str:
    """The set as kubectl names it in its messages (``deployment.apps/web``)."""
    if kind == "leaderworkerset":
        return f"{lws.PLURAL[:-1]}.{lws.GROUP}/{name}"
    return f"{ds.PLURAL[:-1]}.{ds.GROUP}/{name}"


def patch_body(body: Mapping[str, Any], pause: bool) -> dict[str, Any] | None:
    """The merge patch that pauses (``pause``) or resumes the set read as ``body``, or None
    when it already is so. Guarded by the resourceVersion read: a set changed meanwhile is
    read and decided again rather than overwritten."""
    if paused(body) == pause:
        return None
    version = (body.get("metadata") or {}).get("resourceVersion")
    return {"metadata": {"resourceVersion": version,
                         "annotations": {PAUSED_ANNOTATION: "true" if pause else None}}}


async def _set(session: Session, args: argparse.Namespace, pause: bool) -> int:
    ns = session.namespace
    verb = "paused" if pause else "resumed"
    try:
        for attempt in range(3):
            target = await resolve(session.kube, ns, args.name, args.kind)
            body = patch_body(target.body, pause)
            where = resource(target.kind, args.name)
            if body is None:
                print(f'error: {where} is {"already" if pause else "not"} paused',
                      file=sys.stderr)
                return EXIT_FAILED
            try:
                await session.kube.request("PATCH", target.path, body=body,
                                           content_type=MERGE_PATCH)
                break
            except ApiException as exc:
                if exc.status != 409 or attempt == 2:
                    raise
    except (NotFound, Ambiguous) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ApiException as exc:
        print(f"error: {exc.status} {exc.reason}: {exc.body}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{where} {verb}")
    return EXIT_OK


async def run_pause(session: Session, args: argparse.Namespace) -> int:
    return await _set(session, args, True)


async def run_resume(session: Session, args: argparse.Namespace) -> int:
    return await _set(session, args, False)
