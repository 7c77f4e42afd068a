"""Bad input to the two command lines, as a user meets it: run as processes, each bad flag,
environment variable, configuration file or kubeconfig gives one line on stderr naming it, the
exit code its help promises, and never a traceback.

No API server is needed: a kubeconfig pointing at a closed port stands for an unreachable one
(bad credentials against a real one: ``tests/integration/test_bad_credentials.py``).

A process start is mostly imports (about half a second of CPU each, some 75 cases): the cases
run as processes forked from one interpreter that has imported the two command lines already
(``_FORKER``), each as ``python -m`` runs the module, with the case's environment, its own
stderr and stdin, and the exit status the interpreter would give. A sample of the cases also
runs as fresh interpreters (``SAMPLE``), which must say exactly what the forked ones say."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad-input")
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    unreachable = root / "unreachable.yaml"
    unreachable.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{closed}', "
        "insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: here, context: {cluster: c, user: u}}]\ncurrent-context: here\n")
    broken = root / "broken.yaml"
    broken.write_text("apiVersion: v1\nclusters: [\n")
    no_context = root / "no-context.yaml"
    no_context.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\n"
                          "contexts: []\n")
    bad_config = root / "config.yaml"
    bad_config.write_text("apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"
                          "leaderElection: {leaseDuration: soon}\n")
    not_yaml = root / "not-yaml.yaml"
    not_yaml.write_text("webhook: {port: [\n")
    return {"unreachable": str(unreachable), "broken": str(broken),
           "no_context": str(no_context), "bad_config": str(bad_config),
           "not_yaml": str(not_yaml), "dir": str(root), "missing": str(root / "missing.yaml")}


# (command, environment) -> (exit code, stderr), filled for every case at once by ``prefetch``
# (a process start is mostly imports: run side by side they take a fraction of the time).
_RESULTS: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], tuple[int, str]] = {}


def _key(command: list[str], env: dict[str, str]
         ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    return tuple(command), tuple(sorted(env.items()))


def run(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    found = _RESULTS.get(_key(command, env))
    return found if found is not None else _run(command, env)


def _clean() -> dict[str, str]:
    """The environment every case starts from, before its own variables."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("LWS_") and k not in ("KUBECONFIG", "POD_NAMESPACE")}
    clean["HOME"] = "/nonexistent-home"  # no ~/.kube/config to fall back on
    clean["NO_COLOR"] = "1"
    return clean


def _run(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    """The case run by a fresh interpreter."""
    done = subprocess.run(command, env={**_clean(), **env}, cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr


# Reads a JSON list of [module, argv, environment, stderr file] from stdin; forks a child per
# case (a few at a time), which runs the module as ``python -m`` does; prints the exit codes
# as a JSON list. What the command lines import at start is imported once, before any fork
# (no thread runs then); the rest is imported by each child as a fresh process would.
_FORKER = r"""
import atexit, json, os, runpy, sys, traceback, warnings
import lws_operator.__main__, lws_operator.api.config, lws_operator.admission.runtime
import lws_operator.kube.client, lws_operator.kube.logcontext, lws_operator.kube.arenas
import lws_operator.kube.metrics, lws_operator.kube.preflight, lws_operator.kube.ratelimit
import lws_operator.plugin.cli, uvloop
# The plugin's subcommands, which its parser imports first thing (they import the plugin's
# module under its name, a copy next to the one that runs as __main__, as in a fresh process).
lws_operator.plugin.cli._subcommands()
# The operator's module is not imported yet in a fresh process (its imports are).
del sys.modules["lws_operator.__main__"]

def child(module, argv, env, err):
    os.environ.clear()
    os.environ.update(env)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    sys.argv = [module, *argv]
    # runpy's warning that the plugin's module is imported: it is, as said above.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy",
                            message=".*found in sys.modules after import of package")
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:  # as the interpreter ends on it
        code = exc.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)

cases = json.load(sys.stdin)
codes = [None] * len(cases)
running = {}
for index, case in enumerate(cases):
    if len(running) >= 4:
        pid, status = os.wait()
        codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    pid = os.fork()
    if pid == 0:
        child(*case)
    running[pid] = index
while running:
    pid, status = os.wait()
    codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
print(json.dumps(codes))
"""


def _run_forked(cases: list[tuple[list[str], dict[str, str]]], scratch: Path,
                ) -> list[tuple[int, str]]:
    """Every case (``[sys.executable, "-m", module, *argv]``, environment), forked from one
    interpreter started as the cases' fresh ones are (``_run``)."""
    jobs = []
    for index, (command, env) in enumerate(cases):
        assert command[:2] == [sys.executable, "-m"], command
        jobs.append([command[2], command[3:], {**_clean(), **env}, str(scratch / f"{index}.err")])
    done = subprocess.run([sys.executable, "-c", _FORKER], input=json.dumps(jobs), env=_clean(),
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    codes = json.loads(done.stdout)
    return [(code, (scratch / f"{index}.err").read_text()) for index, code in enumerate(codes)]


OPERATOR = [sys.executable, "-m", "lws_operator"]
PLUGIN = [sys.executable, "-m", "lws_operator.plugin.cli"]
# Everything a start would need but the bad input: nothing may be bound or reached first.
QUIET = ["--webhook-port", "0", "--health-port", "0", "--metrics-bind-address", "0"]

# (command after the program, environment, exit code, what the one line must name)
OPERATOR_CASES: list[tuple[list[str], dict[str, str], int, list[str]]] = [
    (["run", "--log-level", "bogus"], {}, 2, ["--log-level", "'bogus'"]),
    (["run", "--zap-log-level", "loud"], {}, 2, ["--zap-log-level", "'loud'"]),
    (["run", "--log-format", "xml"], {}, 2, ["--log-format", "'xml'"]),
    (["run", "--workers", "abc"], {}, 2, ["--workers", "'abc'"]),
    (["run", "--workers", "0"], {}, 2, ["--workers", "'0'"]),
    (["run", "--webhook-port", "99999"], {}, 2, ["--webhook-port", "'99999'"]),
    (["run", "--health-port", "http"], {}, 2, ["--health-port", "'http'"]),
    (["run", "--kube-api-qps", "fast"], {}, 2, ["--kube-api-qps", "'fast'"]),
    (["run", "--kube-api-burst", "-1"], {}, 2, ["--kube-api-burst", "'-1'"]),
    (["run", "--cert-validity", "90d"], {}, 2, ["--cert-validity", "'90d'"]),
    (["run", "--cert-sync-interval=-1s"], {}, 2, ["--cert-sync-interval", "'-1s'"]),
    (["run", "--leader-elect=maybe"], {}, 2, ["--leader-elect", "'maybe'"]),
    (["run", "--leader-elect-retry-period", "often"], {}, 2,
     ["--leader-elect-retry-period", "'often'"]),
    (["run", "--metrics-secure=yes"], {}, 2, ["--metrics-secure", "'yes'"]),
    (["run", "--cert-management", "manual"], {}, 2, ["--cert-management", "'manual'"]),
    (["run", "--scheduler-provider", "kueue"], {}, 2, ["--scheduler-provider", "'kueue'"]),
    (["run", "--no-such-flag"], {}, 2, ["--no-such-flag"]),
    (["nosuchcommand"], {}, 2, ["nosuchcommand"]),
    # The environment: each flag's variable, parsed after the command line.
    (["--help"], {"LWS_WORKERS": "abc"}, 0, []),
    (["run"], {"LWS_WORKERS": "abc"}, 2, ["--workers", "LWS_WORKERS='abc'"]),
    (["run"], {"LWS_WEBHOOK_PORT": "https"}, 2, ["--webhook-port", "LWS_WEBHOOK_PORT='https'"]),
    (["run"], {"LWS_LEADER_ELECT": "yes"}, 2, ["--leader-elect", "LWS_LEADER_ELECT='yes'"]),
    (["run"], {"LWS_DISABLE_CONTROLLERS": "on"}, 2,
     ["--disable-controllers", "LWS_DISABLE_CONTROLLERS='on'"]),
    (["run"], {"LWS_REGISTER_WEBHOOKS": "no"}, 2,
     ["--no-register-webhooks", "LWS_REGISTER_WEBHOOKS='no'"]),
    (["run"], {"LWS_METRICS_SECURE": "nah"}, 2, ["--metrics-secure", "LWS_METRICS_SECURE"]),
    (["run"], {"LWS_LOG_LEVEL": "loud"}, 2, ["--log-level", "LWS_LOG_LEVEL='loud'"]),
    (["run"], {"LWS_LOG_FORMAT": "xml"}, 2, ["--log-format", "LWS_LOG_FORMAT='xml'"]),
    (["run"], {"LWS_CERT_MANAGEMENT": "manual"}, 2,
     ["--cert-management", "LWS_CERT_MANAGEMENT='manual'"]),
    (["run"], {"LWS_SCHEDULER_PROVIDER": "kueue"}, 2,
     ["--scheduler-provider", "LWS_SCHEDULER_PROVIDER='kueue'"]),
    (["run"], {"LWS_CERT_VALIDITY": "1y"}, 2, ["--cert-validity", "LWS_CERT_VALIDITY='1y'"]),
    (["run"], {"LWS_LEADER_ELECT_LEASE_DURATION": "long"}, 2,
     ["--leader-elect-lease-duration", "LWS_LEADER_ELECT_LEASE_DURATION='long'"]),
    (["run"], {"LWS_KUBE_API_QPS": "nan"}, 2, ["--kube-api-qps", "LWS_KUBE_API_QPS='nan'"]),
    (["run", *QUIET[:4]], {"LWS_METRICS_BIND_ADDRESS": "everywhere"}, 2,
     ["--metrics-bind-address (LWS_METRICS_BIND_ADDRESS)", "'everywhere'"]),
    (["run", "--health-probe-bind-address", "8081"], {}, 2,
     ["--health-probe-bind-address", "'8081'"]),
    (["run", "--leader-elect-resource-lock", "configmaps"], {}, 2,
     ["--leader-elect-resource-lock", "'configmaps'"]),
]


@pytest.mark.parametrize(("argv", "env", "code", "named"), OPERATOR_CASES,
                         ids=[" ".join([*a, *(f"{k}={v}" for k, v in e.items())])
                              for a, e, _, _ in OPERATOR_CASES])
def test_operator_flags_and_environment(argv: list[str], env: dict[str, str], code: int,
                                        named: list[str]) -> None:
    exit_code, err = run([*OPERATOR, *argv], env)
    assert exit_code == code, err
    assert "Traceback" not in err
    if code == 0:
        assert err == ""
        return
    [line] = err.strip().splitlines()
    for text in named:
        assert text in line


# Files: the configuration (exit 2) and the kubeconfig (exit 1, a start that cannot connect).
FILE_CASES: list[tuple[list[str], dict[str, str], int, list[str]]] = [
    (["--config", "{bad_config}"], {}, 2, ["{bad_config}", "leaderElection.leaseDuration"]),
    (["--config", "{not_yaml}"], {}, 2, ["{not_yaml}", "not valid YAML"]),
    (["--config", "{missing}"], {}, 2, ["{missing}", "cannot read the file"]),
    (["--config", "{dir}"], {}, 2, ["{dir}", "cannot read the file"]),
    ([], {"LWS_CONFIG": "{missing}"}, 2, ["{missing}", "cannot read the file"]),
    (["--kubeconfig", "{missing}"], {}, 1, ["kubeconfig {missing}: no such file"]),
    ([], {"KUBECONFIG": "{missing}"}, 1, ["{missing}: no such file"]),
    (["--kubeconfig", "{broken}"], {}, 1, ["kubeconfig {broken}:"]),
    (["--kubeconfig", "{no_context}"], {}, 1, ["kubeconfig {no_context}:"]),
    (["--kubeconfig", "{unreachable}", "--context", "elsewhere"], {}, 1,
     ["kubeconfig {unreachable}: no context 'elsewhere'"]),
    (["--kubeconfig", "{unreachable}"], {}, 1, ["cannot reach the API server at 127.0.0.1:"]),
]


def _formatted(files: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    return {k: v.format(**files) for k, v in env.items()}


def _file_command(files: dict[str, str], flags: list[str]) -> list[str]:
    return [*OPERATOR, "run", *QUIET, "--log-format", "text", *(f.format(**files) for f in flags)]


@pytest.mark.parametrize(("flags", "env", "code", "named"), FILE_CASES)
def test_operator_files(files: dict[str, str], flags: list[str], env: dict[str, str],
                        code: int, named: list[str]) -> None:
    exit_code, err = run(_file_command(files, flags), _formatted(files, env))
    assert exit_code == code, err
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    for text in named:
        assert text.format(**files) in line


# The plugin: ``why`` exits 4 when it cannot read (its help), every other subcommand 1.
PLUGIN_COMMANDS = [(["tree"], 1), (["tree", "my-set"], 1), (["why", "my-set"], 4),
                   (["plan", "my-set", "--replicas", "3"], 1),
                   (["recover", "my-set", "0", "--yes"], 1),
                   (["restart", "my-set", "0", "--yes"], 1)]


PLUGIN_KUBECONFIGS: list[tuple[str, str | None, str]] = [
    ("{missing}", None, "kubeconfig {missing}: no such file"),
    ("{broken}", None, "kubeconfig {broken}:"),
    ("{unreachable}", "elsewhere", "kubeconfig {unreachable}: no context 'elsewhere'"),
    ("{unreachable}", None, "cannot reach the API server at 127.0.0.1:"),
]


def _plugin_command(argv: list[str], context: str | None) -> list[str]:
    return [*PLUGIN, *argv, *(["--context", context] if context else [])]


@pytest.mark.parametrize(("argv", "code"), PLUGIN_COMMANDS)
@pytest.mark.parametrize(("kubeconfig", "context", "named"), PLUGIN_KUBECONFIGS)
def test_plugin_kubeconfig_and_connection(files: dict[str, str], argv: list[str], code: int,
                                          kubeconfig: str, context: str | None,
                                          named: str) -> None:
    exit_code, err = run(_plugin_command(argv, context),
                         {"KUBECONFIG": kubeconfig.format(**files)})
    assert exit_code == code, err
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert named.format(**files) in line


PLUGIN_USAGE = [["why"], ["tree", "--bogus"], ["nosuch"], ["plan", "my-set", "--replicas", "many"],
                ["why", "my-set", "-o", "xml"]]


@pytest.mark.parametrize("argv", PLUGIN_USAGE)
def test_plugin_bad_command_lines_exit_2(files: dict[str, str], argv: list[str]) -> None:
    exit_code, err = run([*PLUGIN, *argv], {"KUBECONFIG": files["unreachable"]})
    assert exit_code == 2, err
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith("kubectl lws")


def _every_case(files: dict[str, str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    for argv, env, _, _ in OPERATOR_CASES:
        yield [*OPERATOR, *argv], env
    for flags, env, _, _ in FILE_CASES:
        yield _file_command(files, flags), _formatted(files, env)
    for argv, _ in PLUGIN_COMMANDS:
        for kubeconfig, context, _ in PLUGIN_KUBECONFIGS:
            yield _plugin_command(argv, context), {"KUBECONFIG": kubeconfig.format(**files)}
    for argv in PLUGIN_USAGE:
        yield [*PLUGIN, *argv], {"KUBECONFIG": files["unreachable"]}


# Cases also run by fresh interpreters (by their place in ``_every_case``): a flag, a flag's
# variable, KUBECONFIG from the environment, a kubeconfig whose API server does not answer,
# and the plugin's connection and usage errors.
SAMPLE = (0, 19, 41, 45, 57, 70)
# A fresh interpreter's answer for each case of SAMPLE.
_FRESH: dict[int, tuple[int, str]] = {}


@pytest.fixture(scope="module", autouse=True)
def prefetch(files: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    cases = list(_every_case(files))
    with ThreadPoolExecutor(max_workers=2) as pool:
        fresh = pool.map(lambda i: _run(*cases[i]), SAMPLE)
        forked = _run_forked(cases, tmp_path_factory.mktemp("stderr"))
        _FRESH.update(zip(SAMPLE, fresh, strict=True))
    for case, result in zip(cases, forked, strict=True):
        _RESULTS[_key(*case)] = result
    yield
    _RESULTS.clear()
    _FRESH.clear()


@pytest.mark.parametrize("index", SAMPLE)
def test_a_forked_case_says_what_a_fresh_interpreter_says(files: dict[str, str],
                                                           index: int) -> None:
    case = list(_every_case(files))[index]
    assert _untimed(_RESULTS[_key(*case)]) == _untimed(_FRESH[index]), case


def _untimed(result: tuple[int, str]) -> tuple[int, str]:
    """The result with the time at the start of a log line left out."""
    code, err = result
    return code, re.sub(r"(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", err)


def test_the_plugin_help_states_its_exit_codes() -> None:
    done = subprocess.run([*PLUGIN, "--help"], capture_output=True, text=True, check=True,
                          cwd=REPO)
    assert "exit codes" in done.stdout
    done = subprocess.run([*PLUGIN, "why", "--help"], capture_output=True, text=True,
                          check=True, cwd=REPO)
    assert "4  the API refused" in done.stdout
