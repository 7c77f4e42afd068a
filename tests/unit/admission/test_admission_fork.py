"""The admission child forked at the start of ``lws-operator run`` (``admission.fork``): started
with its settings and sockets, it serves as a spawned child does (its metrics reach the parent,
SIGTERM leaves it serving) and shows as ``lws-admission``; killed, it is started again as a new
interpreter; never started, it ends with the run, killed or not. Each case in an interpreter
of its own (a fork needs a process without threads). About 5 s.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

from tests.unit.admission.test_admission_process import alive

SERVES_AND_RESTARTS = textwrap.dedent("""
    import asyncio, json, os, signal, ssl, sys, time, uuid
    from lws_operator.admission.fork import fork_admission_child

    forked = fork_admission_child()
    assert forked is not None, "not forked"
    import aiohttp, uvloop
    from prometheus_client import CollectorRegistry, generate_latest
    from e2e.harness.admission import lws_pod, served_certificate, serving_keypair
    from lws_operator.admission.process import AdmissionProcess, ChildSettings
    from lws_operator.api.constants import MUTATE_POD_PATH

    async def admit(port):
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": str(uuid.uuid4()), "operation": "CREATE",
                              "namespace": "default",
                              "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "object": lws_pod("p-1")}}
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        async with aiohttp.ClientSession() as session, session.post(
                f"https://127.0.0.1:{port}{MUTATE_POD_PATH}", json=review, ssl=ctx) as answer:
            return (await answer.json())["response"]["patchType"]

    def der(pem):
        return ssl.PEM_cert_to_DER_cert(pem.decode())

    async def main():
        registry = CollectorRegistry()
        process = AdmissionProcess(ChildSettings(host="127.0.0.1", port=0), registry,
                                   forked=forked)
        pair = serving_keypair()
        out = {"forked": forked.pid}
        try:
            await process.serve(pair["tls.crt"], pair["tls.key"])
            first = out["first"] = process.pid
            out["comm"] = open(f"/proc/{first}/comm").read().strip()
            out["served"] = await served_certificate(process.port) == der(pair["tls.crt"])
            out["patch"] = await admit(process.port)
            await process.refresh()
            out["counted"] = ('controller_runtime_webhook_requests_total{code="200",webhook="'
                              f'{MUTATE_POD_PATH}"}} 1.0') in generate_latest(registry).decode()
            os.kill(first, signal.SIGTERM)  # the parent decides when it stops
            await asyncio.sleep(0.5)
            out["after_sigterm"] = process.listening and await admit(process.port)
            os.kill(first, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while not (process.listening and process.pid != first):
                assert time.monotonic() < deadline, "no new admission process"
                await asyncio.sleep(0.1)
            out["second"] = process.pid
            out["second_cmdline"] = open(f"/proc/{process.pid}/cmdline").read().split("\\0")
            out["served_again"] = (await served_certificate(process.port)
                                   == der(pair["tls.crt"]))
            out["patch_again"] = await admit(process.port)
        finally:
            await process.stop()
        print(json.dumps(out), flush=True)

    uvloop.run(main())
""")


def test_the_forked_child_serves_and_a_killed_one_is_spawned_again() -> None:
    done = subprocess.run([sys.executable, "-c", SERVES_AND_RESTARTS], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["first"] == out["forked"]
    assert out["comm"] == "lws-admission"
    assert out["served"]
    assert out["served_again"]
    assert out["patch"] == out["patch_again"] == out["after_sigterm"] == "JSONPatch"
    assert out["counted"]  # its metrics reach the parent's registry
    assert out["second"] != out["first"]
    assert "lws_operator.admission.child" in out["second_cmdline"]
    assert not alive(out["first"])
    assert not alive(out["second"])


def test_a_child_never_started_ends_with_the_run() -> None:
    """A run that stops before serving (a startup error) discards its forked child."""
    script = textwrap.dedent("""
        import os
        from lws_operator.admission.fork import fork_admission_child

        forked = fork_admission_child()
        forked.discard()
        try:
            os.kill(forked.pid, 0)
            print("alive")
        except ProcessLookupError:
            print("gone")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["gone"]


def test_lws_operator_run_with_a_bad_configuration_leaves_no_child() -> None:
    """``main`` forks before it reads the configuration file; exit 2 reaps the child."""
    script = textwrap.dedent("""
        import os, sys
        from lws_operator.__main__ import main

        code = main(["run", "--config", "/nonexistent/config.yaml"])
        children = open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split()
        print(code, len(children))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["2", "0"]
    assert "cannot read the file" in done.stderr


def test_a_waiting_child_ends_with_its_killed_parent() -> None:
    script = textwrap.dedent("""
        import time
        from lws_operator.admission.fork import fork_admission_child

        forked = fork_admission_child()
        print(forked.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while alive(child):
            assert time.monotonic() < deadline, "the forked child outlived its parent"
            time.sleep(0.1)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
