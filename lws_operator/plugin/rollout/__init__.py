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
        description=(__doc__ or "").split("\n\n")[0] or None)  # None under python -OO
    inner = parser.add_subparsers(dest="rollout_command", required=True, metavar="SUBCOMMAND")
    for module in _subcommands():
        module.register(inner)
    for sub in inner.choices.values():
        # kubectl's global options after the inner subcommand too (``kubectl lws rollout pause
        # NAME -n ns``) are added by ``cli``, which gives them to every nested parser.
        sub.add_argument("--kind", choices=KINDS, default=None,
                         help="the kind NAME is (default: whichever exists; both is an error)")


def _subcommands() -> Sequence[ModuleType]:
    """The rollout subcommand modules, in the order ``--help`` lists them (imported here: they
    import this package's ``target``)."""
    from lws_operator.plugin.rollout import history, pause, status, undo

    return (status, pause, history, undo)
