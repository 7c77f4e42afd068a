"""``kubectl lws recover`` and ``kubectl lws restart``: the two writes the plugin makes, each
on one group, each confirmed first (``lws_operator.plugin.analysis.group_actions`` decides what
they act on)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api.constants import NAME_LABEL, RECOVER_ANNOTATION, WORKER_INDEX_LABEL
from lws_operator.api.view import LEADER_INDEX, lws_view
from lws_operator.plugin.analysis.group_actions import (
    group_leaders,
    recover_patch,
    recover_target,
    restart_delete_options,
    restart_target,
)
from lws_operator.plugin.cli import Session
from lws_operator.plugin.output import NotConfirmed, add_yes_option, confirm
from lws_operator.plugin.tree import lws_path, pods_path

RECOVER_DESCRIPTION = f"""\
Recover a group that exhausted its restart budget (maxGroupRestarts): annotate its retained
leader pod with {RECOVER_ANNOTATION}=true, as the LWS docs' "Recover an Exhausted Group" says.
The controller then clears the group's restart count, releases its retained pods and lets the
group start again with a fresh budget. Fix the cause of the failures first.

The restart budget is a feature of lws-operator only: the upstream controller never stops a
group, and the command refuses when the group's leader is not marked exhausted.
GROUP is the group as `kubectl lws tree` shows it: its index (Ordinal), or its index or full
key (Hash). Asks for confirmation unless --yes; refuses when stdin is not a terminal and --yes
is not given."""
RECOVER_EPILOG = """\
examples:
  kubectl lws recover my-set 1
  kubectl lws recover my-set 1 --yes          in a script
  kubectl lws tree my-set                     find groups in state RestartBudgetExhausted"""

RESTART_DESCRIPTION = """\
Recreate one group deliberately, the way the controller recreates a failed group: delete the
group's leader pod with foreground propagation and a UID precondition. Its workers go with it
and the group is created anew (by the leader StatefulSet in Ordinal mode; in Hash mode the
Deployment creates a new leader, which gets a new group key). Other groups are not touched.

Works the same under the upstream controller. A group that exhausted its restart budget is
refused (use `kubectl lws recover`), as is a group whose leader is already terminating.
Asks for confirmation unless --yes; refuses when stdin is not a terminal and --yes is not
given."""
RESTART_EPILOG = """\
examples:
  kubectl lws restart my-set 0
  kubectl lws restart my-set 3f2a1b9c -n serving --yes      a Hash-mode group"""


def register(subparsers: Any) -> None:
    for name, help_text, description, epilog, run in (
            ("recover", "recover a group whose restart budget is exhausted",
             RECOVER_DESCRIPTION, RECOVER_EPILOG, run_recover),
            ("restart", "recreate one group (delete its leader, as the controller does)",
             RESTART_DESCRIPTION, RESTART_EPILOG, run_restart)):
        parser = subparsers.add_parser(
            name, help=help_text, description=description, epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("name", metavar="NAME", help="the LeaderWorkerSet")
        parser.add_argument("group", metavar="GROUP",
                            help="the group index (or, in Hash mode, its key)")
        add_yes_option(parser)
        parser.set_defaults(run=run)


async def _leaders(session: Session, name: str, group: str) -> list[Mapping[str, Any]] | None:
    ns = session.namespace
    if await session.kube.get(lws_path(ns, name)) is None:
        print(f'Error: leaderworkerset "{name}" not found in namespace "{ns}"', file=sys.stderr)
        return None
    pods = await session.kube.request("GET", pods_path(ns), query={
        "labelSelector": f"{NAME_LABEL}={name},{WORKER_INDEX_LABEL}={LEADER_INDEX}"})
    return group_leaders(pods.get("items") or [], name, group)


async def _target(session: Session, args: argparse.Namespace,
                  choose: Callable[[Sequence[Mapping[str, Any]], str], Mapping[str, Any]],
                  ) -> Mapping[str, Any] | None:
    """The leader pod ``choose`` picks of the group's leaders; None (the reason printed) when
    the set is missing or ``choose`` refuses."""
    leaders = await _leaders(session, args.name, args.group)
    if leaders is None:
        return None
    try:
        return choose(leaders, args.group)
    except ValueError as exc:
        print(f"Error: {exc}.", file=sys.stderr)
        return None


def _name_uid(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("name")), str(meta.get("uid"))


async def run_recover(session: Session, args: argparse.Namespace) -> int:
    ns = session.namespace
    try:
        leader = await _target(session, args, recover_target)
        if leader is None:
            return 1
        pod, _ = _name_uid(leader)
        confirm(f"Recover group {args.group} of {ns}/{args.name} (annotate leader pod {pod} "
                f"with {RECOVER_ANNOTATION}=true)?", yes=args.yes)
        for attempt in range(3):
            try:
                await session.kube.request(
                    "PATCH", f"/api/v1/namespaces/{ns}/pods/{pod}",
                    body=recover_patch(leader), content_type="application/merge-patch+json")
                break
            except ApiException as exc:
                # The retained pod's status moved on meanwhile (it is still stopping): read
                # it again and decide again, as the patch is guarded by its resourceVersion.
                if exc.status != 409 or attempt == 2:
                    raise
            leaders = await _leaders(session, args.name, args.group)
            try:
                leader = recover_target(leaders or [], args.group)
            except ValueError as again:
                print(f"Error: {again}.", file=sys.stderr)
                return 1
            pod, _ = _name_uid(leader)
    except NotConfirmed as exc:
        print(f"Error: {exc}.", file=sys.stderr)
        return 1
    except ApiException as exc:
        print(f"Error: {exc.status} {exc.reason}: {exc.body}", file=sys.stderr)
        return 1
    print(f"Annotated leader pod {ns}/{pod} of group {args.group} with "
          f"{RECOVER_ANNOTATION}=true: lws-operator clears the group's restart count, releases "
          "its retained pods, and the group starts again with a fresh budget "
          f"(watch it with `kubectl lws tree {args.name} --watch`).")
    return 0


async def run_restart(session: Session, args: argparse.Namespace) -> int:
    ns = session.namespace
    try:
        leader = await _target(session, args, restart_target)
        if leader is None:
            return 1
        pod, uid = _name_uid(leader)
        lws = await session.kube.get(lws_path(ns, args.name))
        size = lws_view(lws or {}).size
        confirm(f"Restart group {args.group} of {ns}/{args.name}: delete leader pod {pod} and "
                f"with it the group's {size} pod{'s' if size != 1 else ''}?", yes=args.yes)
        await session.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{pod}",
                                   body=restart_delete_options(leader))
    except NotConfirmed as exc:
        print(f"Error: {exc}.", file=sys.stderr)
        return 1
    except ApiException as exc:
        if exc.status == 409:
            print(f"Error: leader pod {pod} changed meanwhile (another incarnation); "
                  "nothing was deleted.", file=sys.stderr)
        else:
            print(f"Error: {exc.status} {exc.reason}: {exc.body}", file=sys.stderr)
        return 1
    print(f"Deleted leader pod {ns}/{pod} (uid {uid}) of group {args.group} with foreground "
          "propagation: its workers go with it and the group is recreated "
          f"(watch it with `kubectl lws tree {args.name} --watch`).")
    return 0
