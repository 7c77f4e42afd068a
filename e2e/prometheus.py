"""A real Prometheus server for the metrics tests: Debian's package, unpacked without root
(with its ``promtool``, which the chart's rule unit tests run).

The pinned package is downloaded once with ``apt-get download`` (the ordinary Debian client)
and unpacked with ``dpkg -x`` into ``~/.cache/lws-operator/prometheus-<version>``; nothing is
installed system-wide and its postinst never runs. The server runs from a scratch directory with
a generated configuration and is stopped by the context manager.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster.launcher import cache_root, free_port

PACKAGE = "prometheus"
VERSION = "2.42.0+ds-5+deb12u1"  # Debian 12's


def binary() -> Path:
    """The pinned ``prometheus`` executable, fetched and unpacked on first use."""
    root = cache_root() / f"prometheus-{VERSION.split('+')[0]}"
    exe = root / "root" / "usr" / "bin" / "prometheus"
    if exe.exists():
        return exe
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        raise RuntimeError("fetching Prometheus needs apt-get and dpkg (a Debian system)")
    with tempfile.TemporaryDirectory(dir=cache_root()) as scratch:
        download = ["apt-get", "download", f"{PACKAGE}={VERSION}"]
        got = subprocess.run(download, cwd=scratch, capture_output=True, text=True)
        if got.returncode != 0 and os.geteuid() == 0:
            # A machine whose package lists were never fetched knows no such version yet.
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
            got = subprocess.run(download, cwd=scratch, capture_output=True, text=True)
        if got.returncode != 0:
            raise RuntimeError(f"`{' '.join(download)}` failed: {got.stderr.strip()}")
        (deb,) = Path(scratch).glob("*.deb")
        unpacked = Path(scratch) / "root"
        subprocess.run(["dpkg", "-x", str(deb), str(unpacked)], check=True)
        root.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(root / "root")
        unpacked.rename(root / "root")
    return exe


def promtool() -> Path:
    """The pinned package's ``promtool`` (the same package ships it), fetched on first use."""
    return binary().parent / "promtool"


@dataclass
class Prometheus:
    url: str
    directory: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` (empty when nothing matches yet)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as answer:
            body = json.load(answer)
        assert body.get("status") == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def query_range(self, expr: str, start: float, end: float,
                    step: float) -> list[dict[str, Any]]:
        """The range vector of ``expr`` between ``start`` and ``end`` (epoch seconds)."""
        url = f"{self.url}/api/v1/query_range?" + urllib.parse.urlencode(
            {"query": expr, "start": start, "end": end, "step": step})
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body.get("status") == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts pending or firing now, with their labels and ``state``."""
        with urllib.request.urlopen(f"{self.url}/api/v1/alerts", timeout=5) as answer:
            found: list[dict[str, Any]] = json.load(answer)["data"]["alerts"]
            return found

    def rules(self) -> list[dict[str, Any]]:
        """Every loaded rule, with its ``health`` and ``lastError``."""
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=5) as answer:
            groups = json.load(answer)["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def targets(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=5) as answer:
            active: list[dict[str, Any]] = json.load(answer)["data"]["activeTargets"]
            return active


@contextlib.contextmanager
def running(directory: Path, scrape: dict[str, Any], timeout: float = 60.0,
            rule_groups: list[dict[str, Any]] | None = None,
            job: str = "lws-operator") -> Iterator[Prometheus]:
    """Prometheus scraping one job (``scrape``: the scrape_config, without job name and
    interval) every second, until the context ends; with ``rule_groups`` (a rule file's
    ``groups``, e.g. a PrometheusRule's spec) loaded and evaluated every second. ``job`` is
    the job's name (the ``job`` label the chart's alerts on the operator itself select)."""
    exe = binary()
    directory.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                   "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": job, **scrape}]}
    if rule_groups is not None:
        (directory / "rules.yml").write_text(yaml.safe_dump({"groups": rule_groups}))
        config["rule_files"] = [str(directory / "rules.yml")]
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (directory / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [str(exe), f"--config.file={directory / 'prometheus.yml'}",
         f"--storage.tsdb.path={directory / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=directory)
    log.close()
    server = Prometheus(f"http://127.0.0.1:{port}", directory)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Prometheus did not start:\n"
                                   + (directory / "prometheus.log").read_text()[-3000:])
            time.sleep(0.25)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
