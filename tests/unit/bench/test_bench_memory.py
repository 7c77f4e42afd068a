"""``e2e.bench.process.TreeMemory`` (``ProfiledOperator.memory``): the RSS sum over the operator
and its children, and next to it the same observation with the pages they share counted once
(the operator's RSS plus each child's USS), whose peak the memory targets are held to. Runs a
real parent and child (~1 s), no cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

from e2e.bench.process import ProfiledOperator, children_of
from e2e.harness.clusters import REPO
from e2e.harness.launcher import (
    OPTIMIZE,
    OperatorProcess,
    bytecode_cache,
    memory_mib,
    shared_memory_mib,
)

# A parent that starts a child: both map the interpreter and its libraries, pages the RSS sum
# counts twice.
PARENT = ("import subprocess, sys, time\n"
          "child = subprocess.Popen([sys.executable, '-c', 'import json, time; time.sleep(60)'])\n"
          "print('ready', flush=True)\n"
          "time.sleep(60)\n")


def test_the_shared_pages_count_once_next_to_the_rss_sum() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while not children_of(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        [child] = children_of(parent.pid)
        time.sleep(0.3)  # the child's interpreter is up
        operator: Any = SimpleNamespace(pid=parent.pid, memory=lambda: memory_mib(parent.pid))
        profiled = ProfiledOperator(operator)
        first = profiled.memory()
        second = profiled.memory()

        child_rss, child_uss = memory_mib(child)["rss"], shared_memory_mib(child)["uss"]
        assert child_uss < child_rss  # the child shares the interpreter's pages
        for seen in (first, second):
            assert seen["admission_rss"] > 0
            assert seen["operator_rss"] < seen["rss_shared_once"] < seen["rss"]
            assert seen["peak_rss_shared_once"] <= seen["peak_rss"]
            assert seen["admission_uss"] == round(seen["rss_shared_once"]
                                                  - seen["operator_rss"], 1)
        # The peak: the largest sampled sum, or the parent's high-water mark plus the child's
        # largest USS seen, whichever is larger.
        largest_uss = max(first["admission_uss"], second["admission_uss"])
        assert abs(second["peak_rss_shared_once"] - max(
            first["rss_shared_once"], second["rss_shared_once"],
            memory_mib(parent.pid)["peak_rss"] + largest_uss)) <= 0.2
        assert [round(v, 1) for _, v in profiled.tree.shared_once_samples] == [
            first["rss_shared_once"], second["rss_shared_once"]]
    finally:
        for pid in children_of(parent.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()


def test_the_measured_operator_runs_at_the_images_optimization_level(tmp_path: Any) -> None:
    """As the image runs it (the Dockerfile's PYTHONOPTIMIZE), from the cache of bytecode of
    that level that ``compile_package`` fills; other operators run as the tests' own Python."""
    measured = OperatorProcess("kubeconfig", "ns", tmp_path / "log", optimized=True)
    env = measured._env()
    assert env["PYTHONOPTIMIZE"] == str(OPTIMIZE) == "2"
    assert env["PYTHONPYCACHEPREFIX"] == str(bytecode_cache())
    plain = OperatorProcess("kubeconfig", "ns", tmp_path / "log")._env()
    assert plain.get("PYTHONOPTIMIZE") == os.environ.get("PYTHONOPTIMIZE")
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f"ENV PYTHONOPTIMIZE={OPTIMIZE}\n" in dockerfile
    assert f"compileall -q -o {OPTIMIZE} /venv" in dockerfile
