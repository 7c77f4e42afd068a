"""``kube.arenas``: ``lws-operator run`` limits glibc's malloc arenas and fixes its trim
threshold unless the environment already does, and its children inherit both (one child
process each, ~0.1 s)."""

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


TRIM = ("import os, subprocess, sys\n"
        "from lws_operator.kube.arenas import trim_freed_memory\n"
        "print(trim_freed_memory())\n"
        "print(subprocess.run([sys.executable, '-c', 'import os; "
        "print(os.environ.get(\"MALLOC_TRIM_THRESHOLD_\"))'], capture_output=True, text=True)"
        ".stdout.strip())\n")
UNSET = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")


def run_trim(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", TRIM], capture_output=True, text=True,
                         check=True, env=env)
    return out.stdout.split()


def test_the_trim_threshold_is_set_and_inherited_when_nothing_set_it() -> None:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    assert run_trim(env) == ["True", str(128 * 1024)]


def test_a_trim_or_mmap_threshold_from_the_environment_is_left_alone() -> None:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    assert run_trim({**env, "MALLOC_TRIM_THRESHOLD_": "65536"}) == ["False", "65536"]
    assert run_trim({**env, "MALLOC_MMAP_THRESHOLD_": "65536"}) == ["False", "None"]


def test_lws_operator_run_sets_both() -> None:
    """``main`` calls both before it starts the loop (the run then fails on a missing
    kubeconfig)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", *UNSET)}
    code = ("import os, sys\n"
            "from lws_operator.__main__ import main\n"
            "main(['run', '--kubeconfig', '/nonexistent/kubeconfig', '--health-port', '0'])\n"
            "print(os.environ.get('MALLOC_ARENA_MAX'), os.environ.get('MALLOC_TRIM_THRESHOLD_'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    assert out.stdout.split() == ["2", str(128 * 1024)]
