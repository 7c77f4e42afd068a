"""The one parser of booleans (``flags.parse_bool``, Go's ``strconv.ParseBool``) and of the
environment (``flags.env``), as every boolean flag of ``lws-operator run`` uses them, from the
command line and from its ``LWS_*`` variable alike."""

from __future__ import annotations

import argparse

import pytest

from lws_operator import flags
from lws_operator.flags import EnvValue, env, parse_bool

# Go's strconv.ParseBool, exactly: these spellings and no others.
GO_TRUE = ["1", "t", "T", "TRUE", "true", "True"]
GO_FALSE = ["0", "f", "F", "FALSE", "false", "False"]
NOT_GO = ["", "yes", "no", "y", "n", "on", "off", "tRUE", "FaLsE", "2", "-1", " true", "true ",
          "enabled"]


@pytest.mark.parametrize(("text", "expected"), [
    *[(text, True) for text in GO_TRUE], *[(text, False) for text in GO_FALSE]])
def test_go_spellings(text: str, expected: bool) -> None:
    assert parse_bool(text) is expected


@pytest.mark.parametrize("text", NOT_GO)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a boolean"):
        parse_bool(text)


def run_parser() -> flags.Parser:
    """The boolean flags' three shapes, as ``run`` declares them: ``--leader-elect[=BOOL]``,
    ``--metrics-secure[=BOOL]`` (default true) and the switch ``--disable-controllers``."""
    parser = flags.Parser(prog="run")
    parser.add_argument("--leader-elect", nargs="?", const=True, type=flags.boolean,
                        default=env("leader_elect"))
    parser.add_argument("--metrics-secure", nargs="?", const=True, type=flags.boolean,
                        default=env("metrics_secure") or True)
    parser.add_argument("--disable-controllers", action=flags.Switch,
                        default=env("disable_controllers"))
    return parser


@pytest.mark.parametrize(("text", "expected"), [
    *[(text, True) for text in GO_TRUE], *[(text, False) for text in GO_FALSE]])
def test_a_flag_and_its_variable_accept_the_same_spellings(
        text: str, expected: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_parser().parse_args([f"--leader-elect={text}"]).leader_elect is expected
    for variable, dest in (("LWS_LEADER_ELECT", "leader_elect"),
                           ("LWS_METRICS_SECURE", "metrics_secure"),
                           ("LWS_DISABLE_CONTROLLERS", "disable_controllers")):
        monkeypatch.setenv(variable, text)
        assert getattr(run_parser().parse_args([]), dest) is expected
        monkeypatch.delenv(variable)


@pytest.mark.parametrize("text", ["yes", "on", ""])
def test_a_bad_variable_is_one_line_naming_it(
        text: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LWS_DISABLE_CONTROLLERS", text)
    with pytest.raises(SystemExit) as exc:
        run_parser().parse_args([])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"LWS_DISABLE_CONTROLLERS={text!r}: not a boolean" in err
    assert err.count("\n") == 1


def test_flags_without_a_value_and_defaults() -> None:
    args = run_parser().parse_args(["--leader-elect", "--disable-controllers"])
    assert (args.leader_elect, args.metrics_secure, args.disable_controllers) == (
        True, True, True)
    args = run_parser().parse_args([])
    assert (args.leader_elect, args.metrics_secure, args.disable_controllers) == (
        None, True, False)


@pytest.mark.parametrize(("environment", "expected"), [
    ({}, None),
    ({"POD_NAMESPACE": "b"}, ("b", "POD_NAMESPACE")),
    ({"LWS_NAMESPACE": "a", "POD_NAMESPACE": "b"}, ("a", "LWS_NAMESPACE")),
    ({"LWS_NAMESPACE": "", "POD_NAMESPACE": "b"}, ("", "LWS_NAMESPACE")),  # set, though empty
])
def test_env_takes_the_lws_variable_then_the_fallbacks(
        environment: dict[str, str], expected: tuple[str, str] | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("LWS_NAMESPACE", "POD_NAMESPACE"):
        monkeypatch.delenv(variable, raising=False)
    for variable, text in environment.items():
        monkeypatch.setenv(variable, text)
    value = env("namespace", "POD_NAMESPACE")
    if expected is None:
        assert value is None
    else:
        assert isinstance(value, EnvValue)
        assert (str(value), value.variable) == expected


def test_a_dashed_name_becomes_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LWS_WEBHOOK_PORT", "9443")
    assert env("webhook-port") == "9443"
    assert env("webhook_port") == "9443"


def test_boolean_is_an_argparse_type() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="'maybe': not a boolean"):
        flags.boolean("maybe")
