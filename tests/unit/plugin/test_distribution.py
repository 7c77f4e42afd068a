"""The plugin's own distribution (plugin/pyproject.toml): its files are exactly the modules the
plugin imports, its dependencies are what those modules import and none of the operator's, and
the wheel, installed alone in a fresh virtualenv, runs."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp

from e2e.harness.plugin_wheel import SharedInstall, run

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "plugin"  # the same as e2e.harness.plugin_wheel's
# The two console scripts' modules; the rest is what they import.
ENTRY_POINTS = ("lws_operator.plugin.cli", "lws_operator.plugin.completion")
# The operator's dependencies that a laptop must not need (uvloop has no Windows build).
OPERATOR_ONLY = ("kopf", "uvloop", "cryptography", "prometheus_client", "httptools")
# What the plugin's modules may import besides the standard library, by the distribution that
# provides it (yarl is aiohttp's URL type, installed with it).
PROVIDED_BY = {"kubernetes": "kubernetes", "yaml": "pyyaml", "pydantic": "pydantic",
               "aiohttp": "aiohttp", "yarl": "aiohttp", "orjson": "orjson"}


def _pyproject(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


def _imported() -> tuple[set[str], set[str]]:
    """The modules the entry points import, transitively, when they run: ours (with every
    package whose ``__init__`` runs on the way) and the external top-level packages. Imports
    under ``TYPE_CHECKING`` do not run and are left out; imports inside functions are in."""
    graph = grimp.build_graph("lws_operator", include_external_packages=True,
                              exclude_type_checking_imports=True, cache_dir=None)
    seen: set[str] = set()
    todo = list(ENTRY_POINTS)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        if module.startswith("lws_operator"):
            todo.extend(graph.find_modules_directly_imported_by(module))
    ours = {m for m in seen if m.startswith("lws_operator")}
    external = {m.split(".")[0] for m in seen - ours} - set(sys.stdlib_module_names)
    return ours, external


def _source(module: str) -> str:
    path = ROOT / module.replace(".", "/")
    return str((path / "__init__.py" if path.is_dir() else path.with_suffix(".py"))
               .relative_to(ROOT))


def _selected() -> set[str]:
    """The repository files the wheel's configuration takes, relative to the repository root."""
    wheel = _pyproject(PLUGIN / "pyproject.toml")["tool"]["hatch"]["build"]["targets"]["wheel"]
    files: set[str] = set()
    for source, target in wheel["force-include"].items():
        path = (PLUGIN / source).resolve()
        assert str(path.relative_to(ROOT)) == target, f"{source} is installed as {target}"
        found = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        files.update(str(p.relative_to(ROOT)) for p in found if "__pycache__" not in p.parts)
    return files


def test_the_wheel_takes_exactly_the_modules_the_plugin_imports() -> None:
    needed = {_source(m) for m in _imported()[0]}
    selected = _selected()
    missing, extra = sorted(needed - selected), sorted(selected - needed)
    assert not missing, "add to plugin/pyproject.toml's force-include:\n" + "\n".join(
        f'"../{f}" = "{f}"' for f in missing)
    assert not extra, "the plugin no longer imports these; drop them from plugin/pyproject.toml:" \
        + "\n" + "\n".join(extra)


def test_the_plugin_imports_none_of_the_operators_dependencies() -> None:
    external = _imported()[1]
    assert not external & set(OPERATOR_ONLY)
    assert external <= set(PROVIDED_BY), f"not provided for: {external - set(PROVIDED_BY)}"


def _requirements(project: dict[str, Any]) -> dict[str, str]:
    pins = {}
    for requirement in project["dependencies"]:
        name = requirement.split(">")[0].split("<")[0].split("=")[0].strip().lower()
        pins[name] = requirement
    return pins


def test_dependencies_are_what_the_modules_import_pinned_as_the_operator_pins_them() -> None:
    plugin = _pyproject(PLUGIN / "pyproject.toml")["project"]
    operator = _pyproject(ROOT / "pyproject.toml")["project"]
    pins = _requirements(plugin)
    assert set(pins) == set(PROVIDED_BY.values())
    operator_pins = _requirements(operator)
    for name, requirement in pins.items():
        assert requirement == operator_pins[name], name
    assert plugin["scripts"] == {name: target for name, target in operator["scripts"].items()
                                 if name in plugin["scripts"]}
    assert set(plugin["scripts"]) == {"kubectl-lws", "kubectl_complete-lws"}


def test_the_wheel_installed_alone_in_a_fresh_virtualenv_runs(
        plugin_wheel: SharedInstall, tmp_path: Path) -> None:
    # The session's install (the root conftest's), which e2e/plugin/test_wheel.py runs too;
    # skipped unless pip reaches the package index it is configured with: the build fetches
    # hatchling from it, and the install the client's dependencies.
    installed = plugin_wheel.installed_or_skip()
    python, bindir = installed.python, installed.bindir
    listed = run(python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check")
    distributions = {line.split("==")[0].lower().replace("_", "-")
                     for line in listed.stdout.splitlines()}
    assert "kubectl-lws" in distributions
    assert not distributions & {"kopf", "uvloop", "cryptography", "prometheus-client",
                                "httptools", "lws-operator"}
    assert run(python, "-m", "pip", "check", "--disable-pip-version-check").returncode == 0

    # Every module in the wheel imports there (the selection is complete where it runs), and
    # none of the operator's dependencies is importable.
    check = run(python, "-c", f"""
import importlib, importlib.metadata, importlib.util, sys
files = importlib.metadata.files("kubectl-lws")
for f in files:
    if f.suffix == ".py":
        importlib.import_module(".".join(f.with_suffix("").parts).removesuffix(".__init__"))
assert all(importlib.util.find_spec(m) is None for m in {OPERATOR_ONLY!r})
print(sum(f.suffix == ".py" for f in files))
""")
    assert check.returncode == 0, check.stderr
    assert int(check.stdout) == len(_selected())

    env = {**os.environ, "KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    helped = run(bindir / "kubectl-lws", "--help", env=env)
    assert helped.returncode == 0, helped.stderr
    assert "tree" in helped.stdout
    assert "why" in helped.stdout
    version = run(bindir / "kubectl-lws", "--version", env=env)
    assert version.stdout.startswith("kubectl-lws ")
    unconfigured = run(bindir / "kubectl-lws", "tree", env=env)
    assert unconfigured.returncode == 1
    assert unconfigured.stderr.startswith("error: kubeconfig ")
    completed = run(bindir / "kubectl_complete-lws", "tr", env=env)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[0].startswith("tree\t")
    assert completed.stdout.splitlines()[-1] == ":4"
    # No kubeconfig: the names are not completed, and nothing is said about it.
    names = run(bindir / "kubectl_complete-lws", "why", "", env=env)
    assert (names.stdout, names.stderr) == (":4\n", "")
