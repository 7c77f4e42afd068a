"""plugins/lws.yaml, the krew manifest: krew's rules hold for it as the repository keeps it and
once a release filled it in (hack/krew_manifest.py), and the rules themselves refuse what krew
refuses."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

import lws_operator

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "hack" / "krew_manifest.py"
MANIFEST = ROOT / "plugins" / "lws.yaml"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("krew_manifest", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KREW = load()


def template() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return loaded


def archives(directory: Path) -> Path:
    for platform in template()["spec"]["platforms"]:
        (directory / platform["uri"]).write_bytes(platform["uri"].encode())
    return directory


def test_the_template_follows_krews_rules_but_for_the_release_values() -> None:
    assert KREW.validate(template(), "lws", released=False) == []
    assert any("sha256" in e for e in KREW.validate(template(), "lws"))


def test_versions_agree_with_the_package() -> None:
    assert template()["spec"]["version"] == f"v{lws_operator.__version__}"


def test_linux_macos_and_windows_each_once_with_an_exe_on_windows() -> None:
    platforms = template()["spec"]["platforms"]
    selected = [(p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"])
                for p in platforms]
    assert {os for os, _ in selected} == {"linux", "darwin", "windows"}
    assert len(selected) == len(set(selected))
    assert all(p["bin"] == ("kubectl-lws.exe" if os == "windows" else "kubectl-lws")
               for p, (os, _) in zip(platforms, selected, strict=True))


def test_krews_line_lengths() -> None:
    spec = template()["spec"]
    assert len(spec["shortDescription"]) <= 70
    assert all(len(line) <= 80 for line in spec["description"].splitlines())


def test_a_filled_manifest_has_each_archives_url_and_digest(tmp_path: Path) -> None:
    filled = KREW.fill(template(), "https://example.test/releases/v0.1.0/",
                       "https://example.test/lws", archives(tmp_path))
    assert KREW.validate(filled, "lws") == []
    linux = filled["spec"]["platforms"][0]
    assert linux["uri"] == "https://example.test/releases/v0.1.0/kubectl-lws_linux_amd64.tar.gz"
    assert linux["sha256"] == hashlib.sha256(b"kubectl-lws_linux_amd64.tar.gz").hexdigest()
    assert filled["spec"]["homepage"] == "https://example.test/lws"


def test_the_script_prints_the_manifest_or_refuses(tmp_path: Path) -> None:
    args = [sys.executable, str(SCRIPT), "--base-url", "https://example.test/r",
            "--homepage", "https://example.test/lws"]
    done = subprocess.run([*args, str(archives(tmp_path))], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert KREW.validate(yaml.safe_load(done.stdout), "lws") == []
    (tmp_path / "kubectl-lws_windows_amd64.zip").unlink()
    missing = subprocess.run([*args, str(tmp_path)], capture_output=True, text=True, check=False)
    assert missing.returncode == 1
    assert "kubectl-lws_windows_amd64.zip" in missing.stderr
    insecure = subprocess.run([*args[:2], "--base-url", "http://example.test/r", *args[4:],
                               str(archives(tmp_path))], capture_output=True, text=True,
                              check=False)
    assert insecure.returncode == 1
    assert "https" in insecure.stderr


def broken(change: str, directory: Path) -> dict[str, Any]:
    """A valid released manifest with one thing krew refuses."""
    manifest = copy.deepcopy(KREW.fill(template(), "https://example.test/r",
                                       "https://example.test", archives(directory)))
    spec, first = manifest["spec"], manifest["spec"]["platforms"][0]
    if change == "apiVersion":
        manifest["apiVersion"] = "krew.googlecontainertools.github.com/v1alpha1"
    elif change == "kind":
        manifest["kind"] = "Plugins"
    elif change == "name":
        manifest["metadata"]["name"] = "lws-operator"
    elif change == "version":
        spec["version"] = "0.1.0"
    elif change == "shortDescription":
        spec["shortDescription"] = "two\nlines"
    elif change == "description":
        del spec["description"]
    elif change == "platforms":
        spec["platforms"] = []
    elif change == "sha256":
        first["sha256"] = first["sha256"].upper()
    elif change == "bin":
        del first["bin"]
    elif change == "selector key":
        first["selector"]["matchLabels"]["distro"] = "debian"
    elif change == "empty selector":
        first["selector"] = {}
    elif change == "unknown platform":
        first["selector"]["matchLabels"]["os"] = "plan9"
    elif change == "overlap":
        first["selector"] = {"matchExpressions": [{"key": "os", "operator": "In",
                                                   "values": ["linux", "darwin"]}]}
    elif change == "windows bin":
        spec["platforms"][-1]["bin"] = "kubectl-lws.bat"
    elif change == "files":
        first["files"] = [{"from": "kubectl-lws"}]
    return manifest


@pytest.mark.parametrize("change", [
    "apiVersion", "kind", "name", "version", "shortDescription", "description", "platforms",
    "sha256", "bin", "selector key", "empty selector", "unknown platform", "overlap",
    "windows bin", "files"])
def test_what_krew_refuses_is_refused(change: str, tmp_path: Path) -> None:
    assert KREW.validate(broken(change, tmp_path), "lws") != []
