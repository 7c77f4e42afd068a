"""``kube.arenas``: ``lws-operator run`` limits glibc's malloc arenas unless the environment
already does, and its children inherit the limit (one child process each, ~0.1 s)."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = ("import os, subprocess, sys\n"
        "from lws_operator.kube.arenas import limit_arenas\n"
        "print(limit_arenas())\n"
        "print(subprocess.run([sys.executable, '-c', 'import os; "
        "print(os.environ.get(\"MALLOC_ARENA_MAX\"))'], capture_output=True, text=True)"
        ".stdout.strip())\n")


def run(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         check=True, env=env)
    return out.stdout.split()


def test_the_limit_is_set_and_inherited_when_nothing_set_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert run(env) == ["True", "2"]


def test_a_limit_from_the_environment_is_left_alone() -> None:
    assert run({**os.environ, "MALLOC_ARENA_MAX": "4"}) == ["False", "4"]
