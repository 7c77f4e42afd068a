"""The plugin's own wheel (``plugin/pyproject.toml``) built and installed alone into a fresh
virtualenv, as a user's ``pip install ./plugin`` does: the unit test checks what it holds and
that it runs (tests/unit/plugin/test_distribution.py), the full-tier test runs it against the
cluster (e2e/plugin/test_wheel.py). Both take the one install of the session (the root
conftest's ``plugin_wheel``, a :class:`SharedInstall`): neither changes it, and the build and
the install are a pip run each, half a minute on a small machine.

The build fetches hatchling and the install the client's dependencies from the package index
pip is configured with: :func:`index_unreachable` says why not, when it cannot be reached.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugin"


def run(*args: str | Path, timeout: float = 600, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def index_unreachable(scratch: Path) -> str | None:
    """Why pip cannot reach its package index (the last line it said), or None when it can."""
    probe = run(sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                "--disable-pip-version-check", "-d", scratch, "hatchling>=1.33,<2", timeout=120)
    if probe.returncode == 0:
        return None
    return (probe.stderr.strip().splitlines() or ["no answer"])[-1]


@dataclass(frozen=True)
class Installed:
    """The wheel installed alone: its virtualenv's interpreter and scripts directory."""

    python: Path
    bindir: Path

    def script(self, name: str) -> Path:
        return self.bindir / (f"{name}.exe" if os.name == "nt" else name)


def install_alone(workdir: Path) -> Installed:
    """Build the wheel into ``workdir/dist`` and install it, with nothing else but its
    dependencies, into a fresh virtualenv ``workdir/venv``."""
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                "--disable-pip-version-check", "-w", workdir / "dist", PLUGIN)
    assert built.returncode == 0, built.stderr
    (wheel,) = (workdir / "dist").glob("kubectl_lws-*.whl")
    venv.create(workdir / "venv", with_pip=True)
    bindir = workdir / "venv" / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    installed = run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    wheel)
    assert installed.returncode == 0, installed.stderr
    return Installed(python, bindir)


class SharedInstall:
    """:func:`install_alone` done once, on first use, into ``workdir`` (from any thread: the
    full tier's fixture builds from a worker thread so that its event loop runs on), or the
    reason it cannot be (:func:`index_unreachable`), also found once."""

    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir
        self._lock = threading.Lock()
        self._done: Installed | str | None = None

    def get(self) -> Installed | str:
        """The install, or why the package index cannot be reached."""
        with self._lock:
            if self._done is None:
                for d in ("probe", "wheel"):
                    (self._workdir / d).mkdir(exist_ok=True)
                why = index_unreachable(self._workdir / "probe")
                self._done = why if why is not None else install_alone(self._workdir / "wheel")
            return self._done

    def installed_or_skip(self) -> Installed:
        """The install; the calling test is skipped when the package index cannot be
        reached (the wheel's dependencies come from it)."""
        import pytest  # only the tests that call this run under pytest

        installed = self.get()
        if isinstance(installed, str):
            pytest.skip(f"the package index pip is configured with is unreachable: {installed}")
        return installed
