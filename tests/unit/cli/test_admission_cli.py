"""`lws-operator run` argument handling (the run itself is covered by the integration tests)."""

from __future__ import annotations

import argparse
import datetime as dt

import pytest

from lws_operator.__main__ import main
from lws_operator.flags import duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0), ("2.5s", 2.5), ("500ms", 0.5), ("1h30m", 5400), ("8760h", 365 * 86400),
    ("1m0.5s", 60.5),
])
def test_durations(text: str, seconds: float) -> None:
    """Go's time.ParseDuration, as for the configuration file's durations."""
    assert duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "abc", "10x", "5m3", "h", "30", "90d", "-1s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def test_run_rejects_a_bad_validity(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--cert-validity", "soon"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--cert-validity" in err
    assert "not a duration" in err


def test_run_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for flag in ("--kubeconfig", "--namespace", "--webhook-port", "--health-port",
                 "--webhook-host", "--cert-validity", "--ca-validity"):
        assert flag in out
