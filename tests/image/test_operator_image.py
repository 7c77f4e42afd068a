"""The operator image built from the Dockerfile (``make image``), run with podman.

The image comes from ``e2e.image.build()``: a no-op when ``make image`` built this tree already.
Every container runs with ``--passwd=false``, so podman adds no /etc/passwd entry for uid 65532:
the image must work for a uid it does not know, as it does under a cluster's ``runAsUser``.

The last test runs the image's operator as users run it (controllers, leader election, webhooks
with their self-issued certificate) against a private API server with host networking: it must
become ready, admit and reconcile a LeaderWorkerSet, and stop cleanly on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.cluster import LocalCluster, NodeLayout
from e2e.cluster.launcher import free_port
from e2e.harness.builder import LeaderWorkerSet
from e2e.harness.launcher import answers_ready
from e2e.image import Image, build, info, podman
from e2e.kube import Kube, wait_for

UID = 65532


@pytest.fixture(scope="module")
def image() -> Image:
    return build()


def run(image: Image, *args: str, entrypoint: str | None = None) -> str:
    """The image's output for ``args`` (after its entrypoint, or ``entrypoint`` instead)."""
    flags = ["--entrypoint", entrypoint] if entrypoint else []
    return podman("run", "--rm", "--passwd=false", "--network", "none", *flags,
                  image.reference, *args).stdout


def test_help(image: Image) -> None:
    out = run(image, "--help")
    assert out.startswith("usage: lws-operator run")
    for flag in ("--kubeconfig", "--webhook-port", "--health-port", "--metrics-bind-address",
                 "--cert-management", "--leader-elect"):
        assert flag in out


def test_version(image: Image) -> None:
    assert run(image, "--version", entrypoint="lws-operator").strip() == "lws-operator 0.1.0"


def test_runs_as_an_unnamed_non_root_user(image: Image) -> None:
    config = info(image)["Config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["lws-operator", "run"]
    out = run(image, "-c", "import os, pwd\n"
              "print(os.getuid(), os.getgid())\n"
              "try:\n    pwd.getpwuid(os.getuid())\nexcept KeyError:\n    print('unnamed')",
              entrypoint="python")
    assert out.split() == [str(UID), str(UID), "unnamed"]


def test_the_archive_names_the_image(image: Image) -> None:
    """The docker-archive a containerd node imports carries the reference the chart uses."""
    with tarfile.open(image.archive) as archive:
        member = archive.extractfile("manifest.json")
        assert member is not None
        manifest = json.load(member)
    assert [entry["RepoTags"] for entry in manifest] == [[image.reference]]
    assert image.helm_values() == {"image": {
        "repository": image.repository, "tag": image.tag, "pullPolicy": "Never"}}


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if os.environ.get("LWS_E2E_KUBECONFIG"):
        pytest.skip("runs the operator's controllers: needs a private API server")
    cluster = LocalCluster(tmp_path_factory.mktemp("image-cluster"))
    cluster.up("api", NodeLayout(), timeout=180)
    try:
        cluster.install_crd()
        yield cluster
    finally:
        cluster.down()


async def test_the_operator_runs_from_the_image(image: Image, private: LocalCluster,
                                               tmp_path: Path) -> None:
    # One self-contained kubeconfig, readable by the image's user.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(private.kubectl("config", "view", "--raw", "--flatten", "--minify"))
    kubeconfig.chmod(0o644)
    namespace = f"image-{uuid.uuid4().hex[:8]}"
    private.kubectl("create", "namespace", namespace)
    health = free_port()
    name = f"lws-operator-test-{uuid.uuid4().hex[:8]}"
    podman("run", "-d", "--name", name, "--passwd=false", "--network", "host",
           "-v", f"{kubeconfig}:/kubeconfig:ro", image.reference,
           "--kubeconfig=/kubeconfig", f"--namespace={namespace}",
           "--webhook-host=127.0.0.1", f"--webhook-port={free_port()}",
           f"--health-port={health}", f"--metrics-bind-address=127.0.0.1:{free_port()}",
           "--log-format=text")

    def logs() -> str:
        out = podman("logs", name, check=False)
        return out.stdout + out.stderr

    kube = await Kube.connect(str(private.kubeconfig))
    try:
        async def ready() -> bool:
            state = podman("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
            assert state == "true", "the operator exited:\n" + logs()
            return await asyncio.to_thread(answers_ready, health)

        await wait_for(ready, timeout=120, what="/readyz of the operator in the image")
        assert (f"lws-operator 0.1.0: namespace {namespace}, local mode, webhooks at "
                "https://127.0.0.1:") in logs()
        # Through its webhooks (defaulting) and its controllers: the leader StatefulSet.
        lws = LeaderWorkerSet("from-image", namespace).replicas(1).size(2).image("nginx:1")
        created = await kube.create(lws.build(), namespace)
        assert created["spec"]["leaderWorkerTemplate"]["restartPolicy"]  # defaulted

        async def statefulset() -> bool:
            return await kube.get("apps/v1", "StatefulSet", "from-image", namespace) is not None

        await wait_for(statefulset, timeout=60, what="the leader StatefulSet")
    finally:
        await kube.close()
        stopped = podman("stop", "--time", "30", name, check=False)
        code = podman("inspect", "--format", "{{.State.ExitCode}}", name,
                      check=False).stdout.strip()
        text = logs()
        podman("rm", "--force", name, check=False)
        private.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    assert stopped.returncode == 0, stopped.stderr
    assert code == "0", text
    assert "Traceback" not in text, text
    assert text.rstrip().endswith("stopped"), text
