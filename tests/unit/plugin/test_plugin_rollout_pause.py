"""``kubectl lws rollout pause|resume`` without a cluster: the command line (kubectl's global
options anywhere) and the patch each writes (the live commands run in
e2e/plugin/test_rollout_pause_live.py)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.plugin.cli import build_parser
from lws_operator.plugin.rollout.pause import patch_body, resource, run_pause, run_resume


@pytest.mark.parametrize("argv", [
    ["rollout", "pause", "web", "-n", "serving"],
    ["-n", "serving", "rollout", "pause", "web"],
    ["rollout", "-n", "serving", "pause", "web"],
])
def test_the_command_line(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.run, args.name, args.namespace, args.kind) == (run_pause, "web", "serving",
                                                                None)


def test_resume_with_a_kind() -> None:
    args = build_parser().parse_args(["rollout", "resume", "d", "--kind", "disaggregatedset"])
    assert (args.run, args.kind) == (run_resume, "disaggregatedset")


def _set(annotations: dict[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "resourceVersion": "42"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta}


P = "lws-operator.dev/paused"


@pytest.mark.parametrize(("annotations", "pause", "patch"), [
    (None, True, {"metadata": {"resourceVersion": "42", "annotations": {P: "true"}}}),
    ({P: "false"}, True, {"metadata": {"resourceVersion": "42", "annotations": {P: "true"}}}),
    ({P: "true"}, True, None),  # already paused: an error, nothing written
    ({P: "true"}, False, {"metadata": {"resourceVersion": "42", "annotations": {P: None}}}),
    ({P: "false"}, False, None),  # not paused
    (None, False, None),
])
def test_patch_body(annotations: dict[str, str] | None, pause: bool,
                    patch: dict[str, Any] | None) -> None:
    assert patch_body(_set(annotations), pause) == patch


def test_resource_names_as_kubectl_does() -> None:
    assert resource("leaderworkerset", "web") == "leaderworkerset.leaderworkerset.x-k8s.io/web"
    assert resource("disaggregatedset", "d") == "disaggregatedset.disaggregatedset.x-k8s.io/d"
