"""``kubectl_complete-lws``: the shell completion kubectl asks the plugin for.

kubectl (1.26 and later) completes a plugin's arguments by running ``kubectl_complete-<plugin>``
from the ``PATH`` with the words typed after the plugin's name, the last one being the word
under completion (empty after a space); it reads one candidate per line, optionally
``candidate<TAB>description``, and a last line ``:<directive>``, cobra's ShellCompDirective
(kubectl's ``plugin_completion.go``, ``getPluginCompletions``). kubectl drops its own global
flags first, so the words are the plugin's alone.

The candidates come from the plugin's own parser (``cli.build_parser``), walked the way argparse
reads the words: subcommands, each parser's flags and their fixed choices, so a subcommand or flag
added to the parser completes without a change here. Names come from where kubectl would find
them: contexts from the kubeconfig, namespaces and set names (LeaderWorkerSets, and
DisaggregatedSets where the subcommand takes one: tree, why, plan, rollout ...; ``--kind``
narrows it) and a set's group indices (a DisaggregatedSet's roles) from the cluster, asked
once with a short deadline. Any failure there (no kubeconfig, no
network, no permission) completes nothing rather than printing an error into the user's shell.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lws_operator.flags import boolean
from lws_operator.kube.client import KubeClient
from lws_operator.plugin.cli import build_parser, connect
from lws_operator.plugin.disaggregated import ds_path
from lws_operator.plugin.rollout.target import KINDS
from lws_operator.plugin.tree import lws_path

# cobra's ShellCompDirective values: 0 lets the shell complete file names, 4 forbids it.
FILES, NO_FILES = 0, 4
# How long the cluster may take to answer one completion: a TAB must not hang.
CLUSTER_DEADLINE = 2.0
# The dests of the options whose values are file names (the shell completes those itself).
FILE_DESTS = frozenset({"kubeconfig", "filename"})
# Group indices offered for a set, at most (a set may have thousands of groups).
MAX_GROUPS = 200
# The subcommands whose NAME may be a DisaggregatedSet as well as a LeaderWorkerSet (the
# others, recover and restart, act on a LeaderWorkerSet's groups).
EITHER_KIND = frozenset({"tree", "why", "plan", "rollout"})


@dataclass
class Scope:
    """The global options typed so far: where the cluster's names are looked up."""

    namespace: str | None = None
    context: str | None = None
    kubeconfig: str | None = None
    all_namespaces: bool = False
    kind: str | None = None  # --kind, where the subcommand has it

    def args(self) -> argparse.Namespace:
        return argparse.Namespace(namespace=self.namespace, context=self.context,
                                  kubeconfig=self.kubeconfig,
                                  all_namespaces=self.all_namespaces)


class Cluster:
    """The names that only the kubeconfig and the cluster know; each method returns [] when
    they cannot be had."""

    def contexts(self, scope: Scope) -> list[str]:
        from kubernetes.aio import config

        try:
            listed, _ = config.list_kube_config_contexts(config_file=scope.kubeconfig)
        except Exception:  # no kubeconfig, or not one
            return []
        return [str(c["name"]) for c in listed]

    def namespaces(self, scope: Scope) -> list[str]:
        return self._ask(scope, lambda s: ["/api/v1/namespaces"], _names)

    def sets(self, scope: Scope, kinds: Sequence[str] = ("leaderworkerset",)) -> list[str]:
        """The names of the sets of ``kinds`` in scope (a kind the cluster does not serve has
        none)."""
        def paths(session: Any) -> list[str]:
            namespace = None if scope.all_namespaces else session.namespace
            return [lws_path(namespace) if kind == "leaderworkerset" else ds_path(namespace)
                    for kind in kinds]

        return self._ask(scope, paths, _names)

    def groups(self, scope: Scope, name: str) -> list[str]:
        """A LeaderWorkerSet's group indices, or a DisaggregatedSet's roles (``why``'s second
        word for one)."""
        def indices(found: dict[str, Any]) -> list[str]:
            spec = found.get("spec") or {}
            if isinstance(spec.get("roles"), list):
                return [str(r.get("name")) for r in spec["roles"] if isinstance(r, dict)]
            replicas = spec.get("replicas", 1)
            count = replicas if isinstance(replicas, int) else 0
            return [str(i) for i in range(min(count, MAX_GROUPS))]

        return self._ask(scope, lambda s: [lws_path(s.namespace, name),
                                           ds_path(s.namespace, name)], indices, first=True)

    def _ask(self, scope: Scope, paths: Callable[[Any], list[str]],
             read: Callable[[dict[str, Any]], list[str]], first: bool = False) -> list[str]:
        """``read`` of each object found at ``paths`` (``first``: of the first found only),
        the names together, sorted when there are several."""
        async def ask() -> list[str]:
            # The kubeconfig's credentials may run a program (an exec plugin): under the
            # deadline too.
            async with asyncio.timeout(CLUSTER_DEADLINE):
                session = await connect(scope.args())
                try:
                    found = []
                    for path in paths(session):
                        got = await _get(session.kube, path)
                        if got is not None:
                            found.append(got)
                            if first:
                                break
                finally:
                    await session.kube.close()
            names = [n for f in found for n in read(f)]
            return sorted(set(names)) if len(found) > 1 else names

        try:
            return asyncio.run(ask())
        except Exception:  # no kubeconfig, unreachable, forbidden, too slow: no candidates
            return []


async def _get(kube: KubeClient, path: str) -> dict[str, Any] | None:
    """The object at ``path``; None when it, or its API, does not exist."""
    return await kube.get(path)


def _names(found: dict[str, Any]) -> list[str]:
    return sorted({str(item["metadata"]["name"]) for item in found.get("items") or []})


@dataclass
class _Position:
    """Where the words typed so far leave the parse: the innermost parser, the positionals it
    has been given, the option still waiting for its value, and the global options seen."""

    parser: argparse.ArgumentParser
    positionals: list[str] = field(default_factory=list)
    pending: argparse.Action | None = None
    scope: Scope = field(default_factory=Scope)


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _remember(scope: Scope, action: argparse.Action, value: str) -> None:
    if action.dest in ("namespace", "context", "kubeconfig", "kind"):
        setattr(scope, action.dest, value)


def _option(position: _Position, word: str) -> None:
    """Read one option word (``--flag``, ``--flag=value``, ``-nVALUE``)."""
    options = position.parser._option_string_actions
    name, equals, value = word.partition("=")
    if not equals and name not in options and not name.startswith("--") and name[:2] in options:
        name, equals, value = name[:2], "=", name[2:]  # a short option with its value attached
    action = options.get(name)
    if action is None:
        return
    if action.dest == "all_namespaces":
        position.scope.all_namespaces = True
    elif _takes_value(action):
        if equals:
            _remember(position.scope, action, value)
        else:
            position.pending = action


def _walk(parser: argparse.ArgumentParser, words: Sequence[str]) -> _Position:
    position = _Position(parser)
    for word in words:
        if position.pending is not None:
            _remember(position.scope, position.pending, word)
            position.pending = None
        elif word.startswith("-") and word != "-":
            _option(position, word)
        else:
            sub = _subcommands(position.parser)
            if sub is not None and word in sub.choices and not position.positionals:
                position.parser = sub.choices[word]
            else:
                position.positionals.append(word)
    return position


def _positional(parser: argparse.ArgumentParser, given: int) -> argparse.Action | None:
    """The positional argument that the next word fills, after ``given`` of them."""
    positionals = [a for a in parser._actions
                   if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
    return positionals[given] if given < len(positionals) else None


def _described(name: str, text: str | None) -> str:
    summary = " ".join((text or "").split())
    return f"{name}\t{summary}" if summary and summary != argparse.SUPPRESS else name


def _values(action: argparse.Action, position: _Position, cluster: Cluster,
            prefix: str = "") -> tuple[list[str], int]:
    """The values an option or positional may take."""
    if action.choices is not None:
        return [prefix + str(c) for c in action.choices], NO_FILES
    if action.type is boolean:
        return [prefix + "true", prefix + "false"], NO_FILES
    if action.dest in FILE_DESTS:
        return [], FILES
    scope = position.scope
    if action.dest == "namespace":
        found = cluster.namespaces(scope)
    elif action.dest == "context":
        found = cluster.contexts(scope)
    elif action.dest == "name":
        found = cluster.sets(scope, _kinds(position))
    elif action.dest == "group" and position.positionals:
        found = cluster.groups(scope, position.positionals[0])
    else:
        found = []
    return [prefix + name for name in found], NO_FILES


def _kinds(position: _Position) -> tuple[str, ...]:
    """The kinds NAME may be at this position: ``--kind`` when typed, else both for the
    subcommands that take either (``EITHER_KIND``), else a LeaderWorkerSet."""
    if position.scope.kind in KINDS:
        return (position.scope.kind,)
    words = position.parser.prog.split()
    return KINDS if len(words) > 2 and words[2] in EITHER_KIND else ("leaderworkerset",)


def _options(parser: argparse.ArgumentParser, word: str, position: _Position,
             cluster: Cluster) -> tuple[list[str], int]:
    name, equals, _ = word.partition("=")
    if equals:  # --output=<TAB>: the option's values, spelled with it
        action = parser._option_string_actions.get(name)
        if action is None or not _takes_value(action):
            return [], NO_FILES
        return _values(action, position, cluster, prefix=name + "=")
    return [_described(option, action.help)
            for action in parser._actions if action.help != argparse.SUPPRESS
            for option in action.option_strings], NO_FILES


def complete(words: Sequence[str], cluster: Cluster) -> tuple[list[str], int]:
    """The candidates for the last of ``words`` (the plugin's arguments as kubectl passes them),
    those starting with it, and the directive for the shell."""
    *typed, current = list(words) or [""]
    position = _walk(build_parser(), typed)
    if position.pending is not None:
        candidates, directive = _values(position.pending, position, cluster)
    elif current.startswith("-"):
        candidates, directive = _options(position.parser, current, position, cluster)
    else:
        sub = _subcommands(position.parser)
        if sub is not None and not position.positionals:
            helps = {choice.dest: choice.help for choice in sub._choices_actions}
            candidates = [_described(name, helps.get(name)) for name in sub.choices]
            directive = NO_FILES
        else:
            action = _positional(position.parser, len(position.positionals))
            candidates, directive = ([], NO_FILES) if action is None else \
                _values(action, position, cluster)
    return [c for c in candidates if c.startswith(current)], directive


def main(argv: Sequence[str] | None = None) -> int:
    """``kubectl_complete-lws``: print the candidates and the directive; always exit 0 (kubectl
    ignores the output of a completion that fails)."""
    silenced = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # a client's warning would land in the user's prompt
    try:
        candidates, directive = complete(sys.argv[1:] if argv is None else argv, Cluster())
    finally:
        logging.disable(silenced)
    sys.stdout.write("".join(f"{c}\n" for c in candidates) + f":{directive}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
