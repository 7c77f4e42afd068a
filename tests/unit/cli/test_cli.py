"""The console script entry point."""

from __future__ import annotations

import pytest

from lws_operator import __version__
from lws_operator.__main__ import main


def test_version_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"lws-operator {__version__}"


def test_a_command_is_required() -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
