"""Fixtures of the plugin's end-to-end tests: the real ``kubectl-lws`` console script (the
package's, or the plugin wheel's installed alone) run against the module's operator and
namespace (``operator`` or ``ds_operator`` fixture), and sets made Ready once per module.
Tests take everything from fixtures (never importing this module)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio

from e2e.harness.converge import get_lws, pods_of, remove
from e2e.harness.launcher import Operator
from e2e.harness.plugin_wheel import SharedInstall
from e2e.kube import is_ready, wait_for

SCRIPT = Path(sys.executable).parent / "kubectl-lws"


@dataclass(frozen=True)
class Ran:
    """One run of the console script."""

    code: int
    out: str
    err: str


Plugin = Callable[..., Awaitable[Ran]]


def command(op: Operator, *args: str) -> list[str]:
    """``kubectl-lws`` with the operator's kubeconfig and namespace, then ``args``."""
    return [str(SCRIPT), "--kubeconfig", op.kubeconfig, "-n", op.namespace, *args]


def plain_env() -> dict[str, str]:
    """The environment without NO_COLOR (so a test sees the script decide colour itself)."""
    return {k: v for k, v in os.environ.items() if k != "NO_COLOR"}


def runner(op: Operator, script: Path = SCRIPT) -> Plugin:
    """Run ``kubectl-lws ARGS`` (or ``script``) against ``op`` (stdin: ``stdin`` or /dev/null,
    so never a terminal), for at most ``timeout`` seconds."""

    async def run(*args: str, stdin: str | None = None, timeout: float = 60) -> Ran:  # noqa: ASYNC109
        proc = await asyncio.create_subprocess_exec(
            str(script), *command(op, *args)[1:], env=plain_env(),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), timeout)
        assert proc.returncode is not None
        return Ran(proc.returncode, out.decode(), err.decode())

    return run


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def kubectl_lws(operator: Operator) -> Plugin:
    """Run ``kubectl-lws ARGS`` against the module's operator and namespace."""
    return runner(operator)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ds_kubectl_lws(ds_operator: Operator) -> Plugin:
    """``kubectl_lws`` against the module's operator with the DisaggregatedSet CRDs."""
    return runner(ds_operator)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def wheel_kubectl_lws(operator: Operator, plugin_wheel: SharedInstall) -> Plugin:
    """``kubectl_lws``, but the ``kubectl-lws`` of the plugin's own wheel installed alone in a
    fresh virtualenv (``e2e.harness.plugin_wheel``: the session's, which the unit tests of the
    distribution may have built already); skipped when pip cannot reach its package index to
    build it."""
    installed = await asyncio.to_thread(plugin_wheel.installed_or_skip)
    return runner(operator, installed.script("kubectl-lws"))


@dataclass
class Watching:
    """A ``kubectl-lws ... --watch`` process and what it printed so far."""

    proc: asyncio.subprocess.Process
    out: str = ""
    err: str = ""

    async def until(self, predicate: Callable[[str], bool], what: str) -> str:
        """Read stdout until ``predicate(all output so far)`` holds."""
        assert self.proc.stdout is not None
        stream = self.proc.stdout

        async def probe() -> str | None:
            try:
                chunk = await asyncio.wait_for(stream.read(65536), 1.0)
            except TimeoutError:
                chunk = b""
            self.out += chunk.decode()
            return self.out if predicate(self.out) else None

        got = await wait_for(probe, timeout=90, what=what)
        assert got is not None
        return got

    async def interrupt(self) -> int:
        """Ctrl-C, as a terminal sends it; the exit code. The output is read on meanwhile, as a
        terminal reads it: a redraw into a full pipe would block the process in its write, where
        the interrupt cannot end it."""
        self.proc.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(self.proc.communicate(), 30)
        self.out += out.decode()
        assert self.proc.returncode is not None
        return self.proc.returncode


    async def finish(self, timeout: float = 330) -> int:  # noqa: ASYNC109
        """Wait for the process to end by itself; its exit code (the rest of its output read)."""
        out, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        self.out += out.decode()
        self.err += err.decode()
        assert self.proc.returncode is not None
        return self.proc.returncode


def _interruptible() -> None:
    """In the child before exec: Ctrl-C's default action, as in a terminal. A shell starts a
    background job (``make test &``, a CI runner's script) with SIGINT ignored, exec keeps an
    ignored signal ignored, and Python then installs no KeyboardInterrupt handler, so the
    plugin would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.asynccontextmanager
async def _background(op: Operator) -> AsyncIterator[Callable[..., Awaitable[Watching]]]:
    """Start ``kubectl-lws ARGS`` against ``op`` in the background; killed at the end."""
    started: list[Watching] = []

    async def start(*args: str) -> Watching:
        proc = await asyncio.create_subprocess_exec(
            *command(op, *args), env=plain_env(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            preexec_fn=_interruptible)
        started.append(Watching(proc))
        return started[-1]

    try:
        yield start
    finally:
        for watching in started:
            if watching.proc.returncode is None:
                watching.proc.kill()
                await watching.proc.wait()


@pytest_asyncio.fixture(loop_scope="session")
async def watch(operator: Operator) -> AsyncIterator[Callable[..., Awaitable[Watching]]]:
    """Start ``kubectl-lws ARGS`` in the background (``--watch``, ``rollout status``); killed
    at the end."""
    async with _background(operator) as start:
        yield start


@pytest_asyncio.fixture(loop_scope="session")
async def ds_watch(ds_operator: Operator) -> AsyncIterator[Callable[..., Awaitable[Watching]]]:
    """``watch`` against the operator with the DisaggregatedSet CRDs."""
    async with _background(ds_operator) as start:
        yield start


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ready_set(operator: Operator) -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Create a LeaderWorkerSet in the operator's namespace and wait until its ``pods`` pods
    are Ready and its status says every group is; each is removed (pods gone) at the end of
    the module."""
    made: list[str] = []

    async def make(body: dict[str, Any], pods: int) -> str:
        await operator.kube.create(body, operator.namespace)
        name = str(body["metadata"]["name"])
        made.append(name)
        replicas = body["spec"].get("replicas", 1)

        async def ready() -> bool:
            live = [p for p in await pods_of(operator, name)
                    if not p["metadata"].get("deletionTimestamp")]
            status = (await get_lws(operator, name)).get("status") or {}
            return (len(live) == pods and all(is_ready(p) for p in live)
                    and status.get("readyReplicas") == replicas
                    and status.get("updatedReplicas") == replicas)

        await wait_for(ready, timeout=120, what=f"{name}: {pods} pods Ready")
        return name

    yield make
    for name in made:
        await remove(operator, name)
