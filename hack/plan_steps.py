"""Preview a DisaggregatedSet rollout: the planner's step table for given replica counts.

The same command line as upstream's ``hack/plan-steps``, so its documented invocations work here:

    python hack/plan_steps.py --source '{"prefill": 6, "decode": 2}' \\
        --target '{"prefill": 6, "decode": 2}' --surge '{"prefill": 2, "decode": 2}'

Roles are the union of the source and target keys, sorted by name (a role missing from one
side counts 0 there: an added or a removed role). A role missing from ``--surge`` surges 1 and
one missing from ``--unavailable`` has 0, the controller's defaults; the values are group counts
(percentages are scaled by the controller before planning, see
``lws_operator/logic/disaggregated/rollout_config.py``). The table is the walk the controller
takes when every step settles (``all_steps``): one row per state, old and new per role, the
total, and what changed. Columns are padded as upstream pads them; trailing blanks are trimmed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from lws_operator.logic.disaggregated.planner import RoleBudget, Step, all_steps


class UsageError(Exception):
    """A bad argument: printed to stderr, exit status 1."""


def role_map(text: str, flag: str) -> dict[str, int]:
    """A ``{"role": count}`` JSON object of integers."""
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as err:
        raise UsageError(f"Error parsing {flag} JSON: {err}") from err
    if not isinstance(value, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise UsageError(f"Error parsing {flag} JSON: expected an object of role -> integer")
    return value


def describe(previous: Step | None, current: Step, roles: Sequence[str]) -> str:
    """What a step changed: new roles scaled up first, then old roles drained."""
    if previous is None:
        return "initial"
    actions = [f"new {role} +{current.new[i] - previous.new[i]}"
               for i, role in enumerate(roles) if current.new[i] > previous.new[i]]
    actions += [f"old {role} -{previous.past[i] - current.past[i]}"
                for i, role in enumerate(roles) if current.past[i] < previous.past[i]]
    return ", ".join(actions) or "no change"


def table(roles: Sequence[str], steps: Sequence[Step]) -> list[str]:
    """The step table, one line per row, columns two blanks apart."""
    headers = ["Step", *(f"Old {r}" for r in roles), *(f"New {r}" for r in roles),
               "Total", "Action"]
    rows = [[str(i), *map(str, s.past), *map(str, s.new), str(sum(s.past) + sum(s.new)),
             describe(steps[i - 1] if i else None, s, roles)] for i, s in enumerate(steps)]
    widths = [max(len(r[c]) for r in [headers, *rows]) for c in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths,
                                                                  strict=True)).rstrip()
    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def plan(source: Mapping[str, int], target: Mapping[str, int], surge: Mapping[str, int],
         unavailable: Mapping[str, int]) -> list[str]:
    """The whole output: the inputs, a blank line, the step table."""
    roles = sorted({*source, *target})
    if len(roles) < 2:
        raise UsageError("Error: at least 2 roles required")
    initial = [source.get(r, 0) for r in roles]
    goal = [target.get(r, 0) for r in roles]
    budgets = [RoleBudget(surge.get(r, 1), unavailable.get(r, 0)) for r in roles]
    return [
        f"Roles: [{' '.join(roles)}]",
        "Source: " + ", ".join(f"{r}={v}" for r, v in zip(roles, initial, strict=True)),
        "Target: " + ", ".join(f"{r}={v}" for r, v in zip(roles, goal, strict=True)),
        "Config: " + ", ".join(f"{r}(surge={b.surge}, unavailable={b.unavailable})"
                               for r, b in zip(roles, budgets, strict=True)),
        "",
        *table(roles, all_steps(initial, goal, budgets)),
    ]


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout,
         err: TextIO = sys.stderr) -> int:
    parser = argparse.ArgumentParser(
        prog="plan_steps", description="Print the coordinated rollout plan of a "
        "DisaggregatedSet update, step by step.")
    parser.add_argument("--source", default="",
                        help='old replicas per role, e.g. \'{"prefill": 6, "decode": 2}\'')
    parser.add_argument("--target", default="",
                        help='target replicas per role, e.g. \'{"prefill": 6, "decode": 2}\'')
    parser.add_argument("--surge", default="{}", help="max surge per role (default 1)")
    parser.add_argument("--unavailable", default="{}",
                        help="max unavailable per role (default 0)")
    args = parser.parse_args(argv)
    if not args.source or not args.target:
        err.write("Usage: plan_steps --source JSON --target JSON [--surge JSON] "
                  "[--unavailable JSON]\n")
        return 1
    try:
        lines = plan(role_map(args.source, "source"), role_map(args.target, "target"),
                     role_map(args.surge, "surge"), role_map(args.unavailable, "unavailable"))
    except UsageError as error:
        err.write(f"{error}\n")
        return 1
    out.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
