"""Credentials the local API server refuses, or a server the client cannot verify, through both
command lines as processes: one line on stderr naming the problem, the exit code the help
promises (``lws-operator run``: 1; ``kubectl lws why``: 4, the other subcommands: 1), never a
traceback. The kubeconfigs are the api-tier cluster's own with one thing changed."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from e2e.cluster import LocalCluster
from e2e.cluster.launcher import free_port

pytestmark = pytest.mark.api

REPO = Path(__file__).resolve().parents[2]
OPERATOR = [sys.executable, "-m", "lws_operator"]
PLUGIN = [sys.executable, "-m", "lws_operator.plugin.cli"]


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate and key of a CA the API server has never seen."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stranger")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    crt, pem = directory / "stranger.crt", directory / "stranger.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return crt, pem


@pytest.fixture(scope="module")
def kubeconfigs(lws_crd: LocalCluster, tmp_path_factory: pytest.TempPathFactory
                ) -> dict[str, str]:
    root = tmp_path_factory.mktemp("credentials")
    good: dict[str, Any] = yaml.safe_load(lws_crd.kubeconfig.read_text())
    crt, key = _self_signed(root)

    def variant(name: str, user: dict[str, Any] | None = None,
                cluster: dict[str, Any] | None = None) -> str:
        conf = copy.deepcopy(good)
        if user is not None:
            conf["users"][0]["user"] = user
        if cluster is not None:
            conf["clusters"][0]["cluster"].update(cluster)
        path = root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(conf))
        return str(path)

    return {
        "token": variant("token", user={"token": "not-a-valid-token"}),
        "stranger": variant("stranger", user={"client-certificate": str(crt),
                                              "client-key": str(key)}),
        "anonymous": variant("anonymous", user={}),
        "wrong-ca": variant("wrong-ca", cluster={"certificate-authority": str(crt)}),
        "missing-cert": variant("missing-cert", user={
            "client-certificate": str(root / "gone.crt"), "client-key": str(root / "gone.key")}),
    }


async def run(command: list[str], kubeconfig: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LWS_")}
    env["KUBECONFIG"] = kubeconfig
    done = await asyncio.to_thread(subprocess.run, command, env=env, cwd=REPO,
                                   capture_output=True, text=True, timeout=120, check=False,
                                   stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


REFUSED = {"token": "401", "stranger": "401", "anonymous": "40"}  # 401, or 403 for anonymous


@pytest.mark.parametrize("case", ["token", "stranger", "anonymous", "wrong-ca", "missing-cert"])
async def test_the_operator_names_what_the_server_refused(kubeconfigs: dict[str, str],
                                                          case: str) -> None:
    code, err = await run([*OPERATOR, "run", "--webhook-host", "127.0.0.1", "--webhook-port",
                           str(free_port()), "--health-port", str(free_port()),
                           "--metrics-bind-address", "0", "--log-format", "text",
                           "--namespace", "lws-system"], kubeconfigs[case])
    assert code == 1, err
    assert "Traceback" not in err, err
    [line] = [entry for entry in err.splitlines() if "startup error:" in entry]
    if case in REFUSED:
        assert f"answered {REFUSED[case]}" in line, line
    elif case == "wrong-ca":
        assert "cannot reach the API server at 127.0.0.1:" in line, line
        assert "certificate" in line.lower(), line
    else:
        assert f"kubeconfig {kubeconfigs[case]}:" in line, line


@pytest.mark.parametrize(("argv", "exit_code"), [
    (["tree"], 1), (["why", "my-set"], 4), (["plan", "my-set", "--replicas", "2"], 1),
    (["restart", "my-set", "0", "--yes"], 1)])
@pytest.mark.parametrize("case", ["token", "wrong-ca", "missing-cert"])
async def test_the_plugin_names_what_the_server_refused(kubeconfigs: dict[str, str],
                                                        argv: list[str], exit_code: int,
                                                        case: str) -> None:
    code, err = await run([*PLUGIN, *argv], kubeconfigs[case])
    assert code == exit_code, err
    line = one_line(err)
    if case == "token":
        assert "401" in line or "Unauthorized" in line, line
    elif case == "wrong-ca":
        assert "cannot verify the API server at 127.0.0.1:" in line, line
    else:
        assert f"kubeconfig {kubeconfigs[case]}:" in line, line
