"""hack/plan_steps.py, the rollout preview CLI (upstream's hack/plan-steps command line): the
exact table for the KEP-766 example, role sorting and defaults, added/removed roles, and the
usage errors."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "hack" / "plan_steps.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_steps", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PLAN_STEPS = load()


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = PLAN_STEPS.main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_kep_example_table_from_the_command_line() -> None:
    """The real script (a subprocess), roles sorted (decode before prefill), per-role surge and
    unavailable; the force-drain row changes both sides."""
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--source", '{"prefill": 5, "decode": 2}',
         "--target", '{"prefill": 5, "decode": 2}', "--surge", '{"prefill": 2, "decode": 2}',
         "--unavailable", '{"prefill": 1, "decode": 1}'],
        capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Roles: [decode prefill]\n"
        "Source: decode=2, prefill=5\n"
        "Target: decode=2, prefill=5\n"
        "Config: decode(surge=2, unavailable=1), prefill(surge=2, unavailable=1)\n"
        "\n"
        "Step  Old decode  Old prefill  New decode  New prefill  Total  Action\n"
        "----  ----------  -----------  ----------  -----------  -----  "
        "---------------------------------------------\n"
        "0     2           5            0           0            7      initial\n"
        "1     2           5            1           2            10     "
        "new decode +1, new prefill +2\n"
        "2     2           4            1           2            9      old prefill -1\n"
        "3     2           3            2           4            11     "
        "new decode +1, new prefill +2, old prefill -1\n"
        "4     1           2            2           4            9      "
        "old decode -1, old prefill -1\n"
        "5     1           2            2           5            10     new prefill +1\n"
        "6     0           0            2           5            7      "
        "old decode -1, old prefill -2\n")


def test_defaults_surge_1_unavailable_0_and_added_role() -> None:
    """A role only in the target (encode) starts at 0 old; roles missing from --surge surge 1."""
    code, out, err = run("--source", '{"prefill": 1, "decode": 1}',
                         "--target", '{"prefill": 1, "decode": 1, "encode": 1}')
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:4] == ["Roles: [decode encode prefill]",
                         "Source: decode=1, encode=0, prefill=1",
                         "Target: decode=1, encode=1, prefill=1",
                         "Config: decode(surge=1, unavailable=0), encode(surge=1, unavailable=0), "
                         "prefill(surge=1, unavailable=0)"]
    assert [line.split()[-1] for line in lines[7:]] == ["initial", "+1", "-1"]
    assert lines[-1].split()[:7] == ["2", "0", "0", "0", "1", "1", "1"]


def test_no_change_row_never_appears_in_a_normal_plan() -> None:
    assert PLAN_STEPS.describe(None, PLAN_STEPS.Step((1,), (0,)), ["a"]) == "initial"
    step = PLAN_STEPS.Step((1,), (0,))
    assert PLAN_STEPS.describe(step, step, ["a"]) == "no change"


@pytest.mark.parametrize(("argv", "message"), [
    (["--source", '{"prefill": 1}'], "Usage: plan_steps --source JSON --target JSON"),
    (["--source", '{"prefill": 1}', "--target", '{"prefill": 1}'],
     "Error: at least 2 roles required"),
    (["--source", '{"a": 1, "b": 1}', "--target", "{oops"], "Error parsing target JSON"),
    (["--source", '{"a": 1.5, "b": 1}', "--target", '{"a": 1}'], "Error parsing source JSON"),
    (["--source", "[1, 2]", "--target", '{"a": 1}'], "Error parsing source JSON"),
])
def test_usage_errors(argv: list[str], message: str) -> None:
    code, out, err = run(*argv)
    assert code == 1
    assert out == ""
    assert err.startswith(message)
