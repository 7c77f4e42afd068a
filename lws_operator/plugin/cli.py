"""The ``kubectl-lws`` entry point: global options like kubectl's, then one subcommand.

kubectl runs any ``kubectl-<name>`` executable on the PATH as ``kubectl <name>``, passing the
remaining arguments through; so the options a kubectl user types (``-n``, ``-A``, ``--context``,
``--kubeconfig``) mean the same here. Each subcommand module exposes ``register(subparsers)``,
which adds its parser and sets ``run``: an ``async (Session, argparse.Namespace) -> int``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kubernetes.aio import client, config

from lws_operator import __version__
from lws_operator.flags import Parser
from lws_operator.kube.client import KubeClient
from lws_operator.kube.connection import (
    CONNECTION_ERRORS,
    CredentialsError,
    load_configuration,
    unreachable,
)

# Exit codes of every subcommand but ``why`` (which says its own in its help).
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

EPILOG = """\
exit codes (`kubectl lws why` has its own: see its --help):
  0  done
  1  failed: not found, refused, the API server unreachable or the kubeconfig unusable
  2  bad command line or input (a flag, a manifest)
  130  interrupted (Ctrl-C)
"""

Run = Callable[["Session", argparse.Namespace], Awaitable[int]]


@dataclass
class Session:
    """What every subcommand needs: the API and the namespace scope the user asked for."""

    kube: KubeClient
    namespace: str
    all_namespaces: bool


async def connect(args: argparse.Namespace) -> Session:
    """The user's kubeconfig and context, as kubectl reads them; the namespace is ``-n``, else
    the context's namespace, else ``default``."""
    conf = client.Configuration()
    path = args.kubeconfig or os.environ.get("KUBECONFIG") or None
    await load_configuration(path, args.context, conf)
    namespace = args.namespace
    if namespace is None:
        listed, active = config.list_kube_config_contexts(config_file=path)
        current = next((c for c in listed if c["name"] == args.context), None) \
            if args.context else active
        namespace = (current or {}).get("context", {}).get("namespace") or "default"
    return Session(KubeClient(client.ApiClient(configuration=conf)), namespace,
                   bool(args.all_namespaces))


def build_parser() -> argparse.ArgumentParser:
    """The global options and every subcommand's parser."""
    parser = Parser(
        prog="kubectl lws",
        description="Show and operate LeaderWorkerSets group by group.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_globals(parser)
    parser.add_argument("--version", action="version", version=f"kubectl-lws {__version__}",
                        help="print the plugin's version and exit")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _subcommands():
        module.register(subparsers)
    for sub in subparsers.choices.values():
        _globals_anywhere(sub)
    return parser


def _globals_anywhere(parser: argparse.ArgumentParser) -> None:
    """kubectl takes its global options anywhere (`kubectl lws tree -A`, `kubectl lws rollout
    status x -n ns`): a subcommand's parser, and a nested subcommand's, take them too; given
    after the subcommand they override the ones before it, and absent they leave them
    alone."""
    _add_globals(parser, argparse.SUPPRESS)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _globals_anywhere(sub)


def _add_globals(parser: argparse.ArgumentParser, default: Any = None) -> None:
    parser.add_argument("-n", "--namespace", default=default,
                        help="the namespace (default: the context's)")
    parser.add_argument("-A", "--all-namespaces", action="store_true",
                        default=False if default is None else default,
                        help="every namespace (where the subcommand lists)")
    parser.add_argument("--context", default=default, help="the kubeconfig context to use")
    parser.add_argument("--kubeconfig", default=default,
                        help="the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")


def _subcommands() -> Sequence[ModuleType]:
    """The subcommand modules, in the order ``--help`` lists them (imported here: they import
    ``Session`` from this module)."""
    from lws_operator.plugin import actions, plan, rollout, tree, why

    return (tree, why, plan, rollout, actions)


async def _main(args: argparse.Namespace) -> int:
    """The subcommand's exit code; a kubeconfig that cannot be loaded or an API server that
    cannot be reached is one line and the subcommand's code for it (``api_error_exit``)."""
    failed: int = getattr(args, "api_error_exit", EXIT_FAILED)
    try:
        session = await connect(args)
    except CredentialsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return failed
    try:
        run: Run = args.run
        return await run(session, args)
    except CONNECTION_ERRORS as exc:
        print(f"error: {unreachable(exc, session.kube.host)}", file=sys.stderr)
        return failed
    finally:
        await session.kube.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``kubectl-lws``: parse, connect, run one subcommand; its exit code."""
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
