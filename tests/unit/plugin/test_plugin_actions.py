"""``kubectl lws recover`` and ``restart``: what they act on and when they refuse
(``lws_operator.plugin.analysis.group_actions``), the confirmation rule and colour detection
(``plugin.output``), and every subcommand's ``--help``."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION,
    NAME_LABEL,
    RECOVER_ANNOTATION,
    WORKER_INDEX_LABEL,
)
from lws_operator.plugin.analysis.group_actions import (
    group_leaders,
    recover_patch,
    recover_target,
    restart_delete_options,
    restart_target,
)
from lws_operator.plugin.cli import build_parser
from lws_operator.plugin.output import NotConfirmed, colour_enabled, confirm, dump


def leader(name: str, group: str = "1", *, uid: str = "u1", key: str | None = None,
           exhausted: bool = False, deleting: bool = False, recover: bool = False,
           lws_name: str = "s") -> dict[str, Any]:
    annotations = {}
    if exhausted:
        annotations[GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION] = "true"
    if recover:
        annotations[RECOVER_ANNOTATION] = "true"
    labels = {NAME_LABEL: lws_name, GROUP_INDEX_LABEL: group, WORKER_INDEX_LABEL: "0"}
    if key:
        labels[GROUP_KEY_LABEL] = key
    meta: dict[str, Any] = {"name": name, "uid": uid, "resourceVersion": "7",
                            "labels": labels, "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_group_leaders_by_index_or_key_live_first() -> None:
    old = leader("s-1", deleting=True, uid="old")
    new = leader("s-1", uid="new")
    other = leader("s-2", "2")
    foreign = leader("t-1", lws_name="t")
    assert group_leaders([old, other, new, foreign], "s", "1") == [new, old]
    hashed = leader("s-x", "abcdef12", key="abcdef12" + "9" * 32)
    assert group_leaders([hashed], "s", "abcdef12") == [hashed]
    assert group_leaders([hashed], "s", "abcdef12" + "9" * 32) == [hashed]
    assert group_leaders([hashed], "s", "abcdef") == []


@pytest.mark.parametrize(("leaders", "error"), [
    ([], "group 1 has no leader pod"),
    ([leader("s-1")], "group 1 has not exhausted its restart budget"),
    ([leader("s-1", exhausted=True, deleting=True, recover=True)], "being recovered already"),
])
def test_recover_refuses(leaders: list[dict[str, Any]], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        recover_target(leaders, "1")


def test_recover_annotates_the_exhausted_leader_guarded() -> None:
    kept = leader("s-1", exhausted=True, deleting=True)
    assert recover_target([kept], "1") is kept
    assert recover_patch(kept) == {"metadata": {"resourceVersion": "7", "annotations": {
        RECOVER_ANNOTATION: "true"}}}


@pytest.mark.parametrize(("leaders", "error"), [
    ([], "group 1 has no leader pod"),
    ([leader("s-1", exhausted=True, deleting=True)], "use `kubectl lws recover`"),
    ([leader("s-1", deleting=True)], "being recreated already"),
])
def test_restart_refuses(leaders: list[dict[str, Any]], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        restart_target(leaders, "1")


def test_restart_deletes_the_live_leader_as_the_controller_does() -> None:
    live = leader("s-1", uid="abc")
    assert restart_target([live], "1") is live
    assert restart_delete_options(live) == {
        "apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground",
        "preconditions": {"uid": "abc"}}


class Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_confirmation() -> None:
    confirm("go?", yes=True, stdin=Terminal(False))  # --yes: never asks
    with pytest.raises(NotConfirmed, match="stdin is not a terminal"):
        confirm("go?", yes=False, stdin=Terminal(False), ask=lambda _: "y")
    asked: list[str] = []

    def yes(question: str) -> str:
        asked.append(question)
        return "y"

    confirm("go?", yes=False, stdin=Terminal(True), ask=yes)
    assert asked == ["go? [y/N] "]
    for answer in ("", "n", "no", "maybe"):
        with pytest.raises(NotConfirmed, match="not confirmed"):
            confirm("go?", yes=False, stdin=Terminal(True), ask=lambda _, a=answer: a)  # type: ignore[misc]

    def eof(_: str) -> str:
        raise EOFError

    with pytest.raises(NotConfirmed):
        confirm("go?", yes=False, stdin=Terminal(True), ask=eof)


@pytest.mark.parametrize(("tty", "env", "colour"), [
    (True, {}, True), (False, {}, False), (True, {"NO_COLOR": "1"}, False),
    (True, {"NO_COLOR": ""}, True),
])
def test_colour_only_on_a_terminal_without_no_color(tty: bool, env: dict[str, str],
                                                    colour: bool) -> None:
    assert colour_enabled(Terminal(tty), env) is colour


def test_dump() -> None:
    assert dump({"a": [1]}, "json") == '{\n  "a": [\n    1\n  ]\n}\n'
    assert dump({"b": 1, "a": None}, "yaml") == "b: 1\na: null\n"


@pytest.mark.parametrize("command", ["tree", "plan", "recover", "restart"])
def test_every_subcommand_has_complete_help(command: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert f"usage: kubectl lws {command}" in text
    assert "examples:" in text
    assert f"kubectl lws {command} " in text.split("examples:")[1]
    subparsers = next(a for a in build_parser()._actions
                      if isinstance(a, argparse._SubParsersAction))
    for action in subparsers.choices[command]._actions:
        assert action.help, f"{command}: {action.dest} has no help"


@pytest.mark.parametrize(("argv", "namespace", "everywhere", "kubeconfig"), [
    (["tree"], None, False, None),
    (["-n", "a", "tree"], "a", False, None),
    (["tree", "-A"], None, True, None),  # kubectl's options after the subcommand, too
    (["-n", "a", "tree", "-n", "b", "--kubeconfig", "k"], "b", False, "k"),
    (["-A", "--kubeconfig", "k", "tree", "x"], None, True, "k"),
    # and after a nested subcommand's
    (["-n", "a", "rollout", "status", "x", "-n", "b", "--kubeconfig", "k"], "b", False, "k"),
    (["--kubeconfig", "k", "rollout", "-n", "b", "status", "x"], "b", False, "k"),
])
def test_global_options_before_or_after_the_subcommand(
        argv: list[str], namespace: str | None, everywhere: bool, kubeconfig: str | None) -> None:
    args = build_parser().parse_args(argv)
    assert (args.namespace, args.all_namespaces, args.kubeconfig) == (
        namespace, everywhere, kubeconfig)
