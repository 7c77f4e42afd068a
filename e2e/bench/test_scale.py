"""The scale benchmark's short variant (``make bench`` runs the full one), and its bad input.

The short run goes through every phase and figure on a cluster of its own, so the full benchmark
is known to work before anyone spends 15 minutes on it. Figures are checked for consistency, not
for speed: timing belongs in the report, not in a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e.bench import compare, process, targets, upstream
from e2e.bench.workloads import PROFILES
from e2e.cluster import LocalCluster
from e2e.kube import Kube, wait_for

REPO = Path(__file__).resolve().parents[2]
SMOKE_CLUSTER = REPO / ".cluster" / "test-bench"


def bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "e2e.bench", *args], cwd=REPO, text=True,
                          capture_output=True, timeout=timeout, check=False)


def test_the_short_run_reports_every_figure(tmp_path: Path) -> None:
    # An earlier run of the same size and one of another size: the table compares with the
    # first only.
    history = tmp_path / "history"
    history.mkdir()
    smoke = {k: getattr(PROFILES["smoke"], k) for k in ("sets", "replicas", "size",
                                                         "steady_seconds")}
    (history / "20000101T000000Z.json").write_text(json.dumps(
        {"profile": smoke, "operator": {"cpu_seconds": {"create": 0.0}}}))
    (history / "20000102T000000Z.json").write_text(json.dumps(
        {"profile": smoke | {"sets": 99}, "operator": {"cpu_seconds": {"create": 1.0}}}))
    # The upstream controller's side too, where its files are (a checkout without them runs
    # raw and ours, and says so).
    with_upstream = upstream.default_dir() is not None
    done = bench("--profile", "smoke", "--cluster-dir", str(SMOKE_CLUSTER), "--results",
                 str(tmp_path), "--webhook-rate", "50", "--webhook-seconds", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads((tmp_path / "latest.json").read_text())
    assert not LocalCluster(SMOKE_CLUSTER).running("kube-apiserver")  # its own cluster stopped
    assert summary["sides"] == (["raw", "ours", "upstream"] if with_upstream else ["raw", "ours"])
    sides = ("baseline", "operator", "upstream") if with_upstream else ("baseline", "operator")

    pods = summary["profile"]["pods"]
    for side in sides:
        for phase in ("create", "rollout", "delete"):
            assert summary[side][phase]["seconds"] > 0
        assert summary[side]["create"]["first_ready_seconds"] > 0
        path = summary[side]["create"]["first_ready_path_seconds"]
        assert set(path) == {"statefulset_created", "pod_created", "pod_scheduled", "pod_ready"}
        assert path["pod_created"] <= path["pod_scheduled"] <= path["pod_ready"]
        assert abs(path["pod_ready"] - summary[side]["create"]["first_ready_seconds"]) < 0.01
        for phase in ("create", "rollout", "delete"):
            cpu = summary[side][phase]["cpu_seconds_by_process"]
            assert cpu["machine"] > 0
            assert "kube-apiserver" in cpu  # the control plane's processes, by name
            assert ("operator" in cpu) is (side == "operator")
            assert ("upstream" in cpu) is (side == "upstream")
            assert "py-spy" not in cpu  # the measured rounds run unprofiled
        timeline = summary["timelines"][side]
        # Every pod became Ready, then Ready on the new image (with no surge pod left over).
        assert any(p[1] == p[3] == pods for p in timeline["create"])
        assert any(p[2] == p[3] == pods for p in timeline["rollout"])
        assert timeline["delete"][-1][3] == 0  # ... and none is left
    assert set(summary["ratios"]) == {"create", "rollout", "delete"}
    if with_upstream:
        _check_upstream_side(summary, tmp_path)
    else:
        assert "upstream" not in summary
        assert "no upstream controller found" in done.stderr
    assert all(r > 0 for r in summary["machine_cpu_ratios"].values())
    # Without the operator's own processes a phase costs the machine less, never more.
    assert all(0 < summary["floor_ratios"][p] < summary["machine_cpu_ratios"][p]
               for p in ("create", "rollout"))

    op = summary["operator"]
    assert op["exit_code"] == 0
    assert op["steady_state"]["writes"] == 0
    assert op["steady_state"]["apiserver_operator_only_writes"] == 0
    for counted in op["cross_check"].values():  # our counters agree with kube-apiserver's
        assert counted["operator"] == counted["apiserver"]
    assert op["api_requests"]["create"]["create statefulsets"] == summary["profile"]["groups"]
    assert op["writes_on_create"]["per_group"] > 0
    assert op["reconcile_time_seconds"]["count"] > 0
    assert op["work_queue_wait_seconds"]["count"] == op["reconcile_time_seconds"]["count"]
    assert op["rate_limiter_wait_seconds"]["count"] > 0
    assert op["pod_webhook_ms"]["count"] >= pods * 2  # admitted on create and on rollout
    assert op["pod_webhook_ms"]["mean"] > 0
    assert op["apiserver_pod_webhook_call_ms"]["count"] == op["pod_webhook_ms"]["count"]
    assert op["apiserver_pod_webhook_call_ms"]["mean"] > 0
    assert op["cpu_seconds"]["total"] > 0
    assert 0 < op["memory_mib"]["at_start"] <= op["memory_mib"]["peak_rss"]
    # Shared pages counted once: never above the RSS sum of the same observations.
    assert 0 < op["memory_mib"]["peak_rss_shared_once"] <= op["memory_mib"]["peak_rss"]
    assert 0 < op["memory_mib"]["at_start_shared_once"] <= op["memory_mib"]["at_start"]
    # The webhook at rate: dry-run creates (the target's figure), then pods stored.
    at_rate = summary["webhook_at_rate"]
    assert at_rate["dry_run"] is True
    assert at_rate["pods_listed"] == 0  # nothing stored
    assert at_rate["stored"]["dry_run"] is False
    for run in (at_rate, at_rate["stored"]):
        assert run["failures"] == 0
        assert run["server_ms"]["count"] > 0
    assert (tmp_path / summary["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A flame graph per phase, by default, from a round of their own after the measured one:
    # create's has the operator's own frames in it; that round's CPU names py-spy's.
    for phase in ("create", "rollout", "delete"):
        spent = summary["profiled_round"]["phases"][phase]["cpu_seconds_by_process"]
        assert "py-spy" in spent
        assert "operator" in spent
    assert summary["profiled_round"]["exit_code"] == 0
    assert set(op["flame_graphs"]) == {"create", "steady", "rollout", "delete"}
    for phase, name in op["flame_graphs"].items():
        for svg in (tmp_path / name, tmp_path / f"latest-{phase}.svg"):
            assert svg.read_text().startswith("<?xml"), svg
            assert "<svg" in svg.read_text()
    assert op["hotspots"]["create"]["samples"] > 0
    assert any("lws_operator" in frame for frame, _ in op["hotspots"]["create"]["inclusive"])

    # The run's summary joins the history, without its pod timelines.
    stamp = summary["plot"].removeprefix("scale-").removesuffix(".png")
    assert json.loads((history / f"{stamp}.json").read_text()) == {
        k: v for k, v in summary.items() if k != "timelines"}

    # The table: every figure, its target and the previous run of the same size.
    rows = {r["key"]: r for r in summary["targets"]}
    assert list(rows) == [f.key for f in targets.ALL_FIGURES]
    for row in rows.values():
        assert row["met"] is (None if row["target"] is None or row["value"] is None
                              else row["value"] <= row["target"])
    for key in ("create.cpu_s", "rollout.cpu_s", "delete.cpu_s", "create.requests",
                "rollout.requests", "create.status_patches", "rollout.status_patches",
                "steady.requests", "create.ratio", "rollout.ratio", "create.first_ready_s",
                "create.median_set_s", "run.peak_rss_mib", "run.peak_shared_once_mib",
                "run.start_rss_mib", "run.start_shared_once_mib",
                "load.webhook_apiserver_mean_ms",
                "load.webhook_server_mean_ms", "rate.webhook_server_p99_ms",
                "rate.webhook_server_p99_stored_ms"):
        assert rows[key]["value"] is not None, key
        assert key in {"create.median_set_s", "run.start_rss_mib", "run.peak_rss_mib",
                       "run.start_shared_once_mib",
                       "load.webhook_apiserver_mean_ms", "load.webhook_server_mean_ms",
                       "rate.webhook_server_p99_stored_ms"} \
            or rows[key]["target"] is not None, key
    assert summary["previous_run"] == "20000101T000000Z.json"
    assert rows["create.cpu_s"]["previous"] == 0.0
    assert rows["create.cpu_s"]["change"] == rows["create.cpu_s"]["value"]
    assert rows["rollout.cpu_s"]["previous"] is None
    # ... and stdout prints that table.
    assert "controller CPU s" in done.stdout
    assert "vs 20000101T000000Z.json" in done.stdout


def _check_upstream_side(summary: dict[str, Any], results: Path) -> None:
    """The upstream controller really ran its side: it reconciled, spent CPU, sent requests
    (status writes among them), held memory, exited cleanly, and ours over its figures were
    computed, with its CRDs in place during its side and ours back after."""
    up = summary["upstream"]
    assert up["exit_code"] == 0
    assert up["crd_switch"]["switched"] is True
    assert up["crd_switch"]["restored"] is True
    assert up["cpu_seconds"]["create"] > 0
    assert up["cpu_seconds"]["rollout"] > 0
    for phase in ("create", "rollout"):
        counted = up["api_requests_counted"][phase]
        assert counted["counted"] > 0
        assert counted["status_patches"] > 0
    assert 0 < up["memory_mib"]["at_start"] <= up["memory_mib"]["peak_rss"]
    # One process: shared pages once is its RSS (no child), so the two peaks agree.
    assert up["memory_mib"]["peak_rss_shared_once"] == up["memory_mib"]["peak_rss"]
    assert up["work_queue_wait_seconds"]["count"] > 0
    assert any(key.startswith("leaderworkerset ") for key in up["reconciles"])
    assert (results / f"{summary['plot'].removesuffix('.png')}-upstream.log").stat().st_size
    versus = summary["vs_upstream"]
    for key in ("create.seconds", "rollout.seconds", "delete.seconds", "first_ready_s",
                "create.cpu_s", "rollout.cpu_s", "rollout.requests", "peak_rss_mib",
                "peak_shared_once_mib"):
        assert versus[key] == compare.ratio(compare.figures_of(summary, "ours")[key],
                                            compare.figures_of(summary, "upstream")[key]), key
    assert set(summary["upstream_ratios"]) == {"create", "rollout", "delete"}
    rows = {r["key"]: r for r in summary["targets"]}
    for key in ("up.create.seconds", "up.rollout.seconds", "up.first_ready_s",
                "up.peak_shared_once_mib"):
        assert rows[key]["value"] is not None, key
        assert rows[key]["target"] is not None, key
    assert rows["up.peak_rss_mib"]["value"] is not None  # the RSS sums' ratio: no target
    assert rows["rollout.cpu_s"]["upstream_run"] == up["cpu_seconds"]["rollout"]


@pytest.mark.parametrize(("args", "message"), [
    (["--sets", "0"], "--sets must be at least 1"),
    (["--size", "1"], "--size must be at least 2"),
    (["--profile", "huge"], "invalid choice: 'huge'"),
    (["--kubeconfig", "/nonexistent/kubeconfig"], "no such file"),
    (["--sides", "ours,upstream"], "--sides must include raw and ours"),
    (["--sides", "raw,ours,upstream", "--upstream-dir", "/nonexistent"],
     "the upstream controller's files are missing"),
])
def test_bad_flags_stop_before_anything_starts(args: list[str], message: str) -> None:
    done = bench(*args, timeout=60)
    assert done.returncode == 2
    assert message in done.stderr


def test_a_cluster_that_does_not_answer_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: "
        "{server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
    done = bench("--kubeconfig", str(config), "--results", str(tmp_path), timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "does not answer" in done.stderr


async def _bench_namespaces(kube: Kube) -> list[str]:
    return [n["metadata"]["name"] for n in await kube.list("v1", "Namespace")
            if n["metadata"]["name"].startswith("lws-bench-")
            and not n["metadata"].get("deletionTimestamp")]


async def _bench_registrations(kube: Kube) -> list[tuple[str, str]]:
    return [(kind, h["metadata"]["name"])
            for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
            for h in await kube.list("admissionregistration.k8s.io/v1", kind)
            if h["metadata"]["name"].startswith("lws-bench-")]


@pytest.mark.full
async def test_a_cluster_too_small_is_refused_before_anything_is_created(
        cluster: LocalCluster, kube: Kube, tmp_path: Path) -> None:
    await asyncio.to_thread(cluster.install_crd)
    done = await asyncio.to_thread(
        bench, "--kubeconfig", str(cluster.kubeconfig), "--results", str(tmp_path),
        "--sets", "999", "--replicas", "10", "--size", "10", timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Ready nodes hold" in done.stderr
    assert await _bench_namespaces(kube) == []


async def _stacks(pid: int) -> str:
    """py-spy's dump of every thread of ``pid`` (with its asyncio frames as Python frames), or
    why there is none."""
    try:
        dump = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("py-spy")), "dump", "--pid", str(pid),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(dump.communicate(), 30)
    except (OSError, TimeoutError) as exc:
        return f"(no py-spy dump: {exc})"
    return out.decode(errors="replace")


@pytest.mark.full
async def test_an_interrupted_run_deletes_what_it_created(
        cluster: LocalCluster, kube: Kube, tmp_path: Path) -> None:
    await asyncio.to_thread(cluster.install_crd)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "e2e.bench", "--kubeconfig", str(cluster.kubeconfig),
        "--results", str(tmp_path), "--profile", "smoke", "--steady-seconds", "600",
        cwd=REPO, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
        # Ctrl-C as at a terminal. A test run started in the background by a non-interactive
        # shell (as CI may start it) inherits SIGINT ignored, Python keeps it ignored, and the
        # bench would never see the signal (this test's failures in such runs).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert process.stderr is not None
    seen = b""
    async with asyncio.timeout(240):
        while b"[bench] operator pid" not in seen:
            line = await process.stderr.readline()
            assert line, seen.decode()[-2000:]
            seen += line
    async def operator_side() -> bool:
        return any(n.startswith("lws-bench-op-") for n in await _bench_namespaces(kube))

    await wait_for(operator_side, 120, what="the operator side's namespace")
    await asyncio.sleep(3)  # into the run: LeaderWorkerSets created, operator running
    operator_pid = int(seen.split(b"[bench] operator pid ")[1].split()[0])
    process.send_signal(signal.SIGINT)
    try:
        try:
            rest = await asyncio.wait_for(process.stderr.read(), 240)
        except TimeoutError:
            # Where the bench's cleanup hangs: its stacks, taken before it is killed.
            raise AssertionError(f"the bench did not stop within 240 s of SIGINT; its stacks:"
                                 f"\n{await _stacks(process.pid)}") from None
        assert await process.wait() == 130, rest.decode()[-2000:]
        assert not await asyncio.to_thread(Path(f"/proc/{operator_pid}").exists)  # gone
        assert await _bench_namespaces(kube) == []
        assert await _bench_registrations(kube) == []
    finally:
        # Whatever failed above, leave nothing for later modules: a second operator would
        # reconcile their sets next to their own, and a registration of the bench's dead
        # webhooks (every namespace, failurePolicy Fail) would refuse all their sets and pods.
        for pid in (operator_pid, process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for kind, name in await _bench_registrations(kube):
            await kube.delete("admissionregistration.k8s.io/v1", kind, name)
        for name in await _bench_namespaces(kube):
            await kube.delete("v1", "Namespace", name)


def test_a_machine_where_py_spy_cannot_attach_is_refused_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What py-spy answers where ptrace is not allowed (a container without SYS_PTRACE).
    denied = tmp_path / "py-spy"
    denied.write_text("#!/bin/sh\necho 'Error: Failed to get process executable name. Check "
                      "that the process is running.' >&2\necho 'Caused by:' >&2\n"
                      "echo '    0: Permission denied (os error 13)' >&2\nexit 1\n")
    denied.chmod(0o755)
    monkeypatch.setattr(process, "PY_SPY", denied)
    with pytest.raises(process.ProfilerError) as refused:
        process.check_py_spy()
    assert "Permission denied (os error 13)" in str(refused.value)
    assert "ptrace" in str(refused.value)
    assert "--no-py-spy" in str(refused.value)
    monkeypatch.setattr(process, "PY_SPY", tmp_path / "absent")
    with pytest.raises(process.ProfilerError, match="py-spy is not installed"):
        process.check_py_spy()
