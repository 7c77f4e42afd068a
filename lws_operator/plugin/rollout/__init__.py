"""``kubectl lws rollout SUBCOMMAND NAME``: operate a rollout the way ``kubectl rollout`` operates a
Deployment's (status, pause, resume, history, undo), for a LeaderWorkerSet or a DisaggregatedSet.

Each subcommand lives in its own module of this package and exposes ``register(subparsers)``, as
the top-level subcommands do; ``target.resolve`` finds which kind NAME is.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from types import ModuleType

from lws_operator.plugin.rollout.target import KINDS


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "rollout", help="status, pause, resume, history and undo of a set's rollout",
        description=__doc__.split("\n\n")[0])
    inner = parser.add_subparsers(dest="rollout_command", required=True, metavar="SUBCOMMAND")
    for module in _subcommands():
        module.register(inner)
    from lws_operator.plugin.cli import _add_globals

    for sub in inner.choices.values():
        sub.add_argument("--kind", choices=KINDS, default=None,
                         help="the kind NAME is (default: whichever exists; both is an error)")
        # kubectl's global options anywhere, after the inner subcommand too (as ``cli`` does
        # for the top-level ones): ``kubectl lws rollout pause NAME -n ns``.
        _add_globals(sub, argparse.SUPPRESS)


def _subcommands() -> Sequence[ModuleType]:
    """The rollout subcommand modules, in the order ``--help`` lists them (imported here: they
    import this package's ``target``)."""
    from lws_operator.plugin.rollout import history, pause, undo

    return (pause, history, undo)
