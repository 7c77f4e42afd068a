"""``kube.extensions``: ``lws-operator run`` has frozenlist use its pure-Python class, so the C++
runtime its extension needs is not mapped, unless the environment chose (one interpreter each,
~1 s)."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = ("from lws_operator.kube.extensions import skip_frozenlist_extension\n"
        "print(skip_frozenlist_extension())\n"
        "import aiohttp, frozenlist\n"
        "print(frozenlist.NO_EXTENSIONS)\n"
        "print(any('libstdc++' in line for line in open('/proc/self/maps')))\n")


def run(env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         check=True, env=env)
    return out.stdout.split()


def test_aiohttp_imports_without_the_cxx_runtime() -> None:
    env = {k: v for k, v in os.environ.items() if k != "FROZENLIST_NO_EXTENSIONS"}
    assert run(env) == ["True", "True", "False"]


def test_a_choice_of_the_environment_is_left_alone() -> None:
    assert run({**os.environ, "FROZENLIST_NO_EXTENSIONS": ""}) == ["False", "False", "True"]


def test_lws_operator_run_sets_it() -> None:
    """``main`` sets it before aiohttp is imported (the run then fails on a missing
    kubeconfig)."""
    env = {k: v for k, v in os.environ.items() if k != "FROZENLIST_NO_EXTENSIONS"}
    code = ("import os, sys\n"
            "from lws_operator.__main__ import main\n"
            "main(['run', '--kubeconfig', '/nonexistent/kubeconfig', '--health-port', '0'])\n"
            "import frozenlist\n"
            "print(os.environ.get('FROZENLIST_NO_EXTENSIONS'), frozenlist.NO_EXTENSIONS)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    assert out.stdout.split() == ["1", "True"]
