"""``kube.cert_planner``: the certificate plan decided in a child process answers as
``logic.runtime.certs.plan`` does in-process, a repeated question is answered without a child, and
the operator's modules import without ``cryptography``. Each child costs about 0.3 s."""

from __future__ import annotations

import datetime as dt
import pickle
import subprocess
import sys

import pytest

from lws_operator.kube.cert_planner import OutOfProcessPlanner, PlannerFailed, self_signed
from lws_operator.kube.certs import CertSettings, WebhookCertManager
from lws_operator.logic.runtime import certs
from tests.harness.quiet_kube import QuietKube

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
POLICY = certs.CertPolicy(dns_names=("lws-webhook-service.lws-system.svc",))


async def test_the_child_plans_as_the_logic_does_and_a_repeated_question_needs_none() -> None:
    planner = OutOfProcessPlanner()
    fresh = await planner.plan(None, now=NOW, policy=POLICY, bundle_injected=False)
    assert fresh.data is not None
    assert (fresh.reason, fresh.ca_changed) == ("created", True)
    assert certs.parse(fresh.data) is not None
    assert planner.processes == 1

    # The pass after the write (the Secret as written, caBundles injected or not yet) finds
    # its answer known: the child answered it with the first clock.
    later = NOW + dt.timedelta(hours=1)
    for injected in (True, False):
        follow_up = await planner.plan(dict(fresh.data), now=later, policy=POLICY,
                                       bundle_injected=injected)
        assert follow_up == certs.plan(fresh.data, now=NOW, policy=POLICY,
                                       bundle_injected=injected)
        assert follow_up == certs.plan(fresh.data, now=later, policy=POLICY,
                                       bundle_injected=injected)
        assert follow_up.data is None
    assert planner.processes == 1

    # Other data (a key someone else added to the Secret) asks a child, whose answer writes
    # nothing and is then known until its next check.
    other = {**fresh.data, "extra": b"x"}
    at_rest = await planner.plan(other, now=later, policy=POLICY, bundle_injected=True)
    assert at_rest == certs.plan(other, now=later, policy=POLICY, bundle_injected=True)
    assert at_rest.data is None
    assert planner.processes == 2
    again = await planner.plan(dict(other), now=later + dt.timedelta(days=30),
                               policy=POLICY, bundle_injected=True)
    assert again == certs.plan(other, now=later + dt.timedelta(days=30), policy=POLICY,
                               bundle_injected=True)
    assert planner.processes == 2

    # Any other input, or the clock at the next check, asks a child again; answers of an
    # earlier child are forgotten.
    await planner.plan(other, now=later, policy=POLICY, bundle_injected=False)
    assert planner.processes == 3
    await planner.plan(other, now=later, policy=POLICY, bundle_injected=True)
    assert planner.processes == 4
    due = await planner.plan(other, now=at_rest.next_check, policy=POLICY,
                             bundle_injected=True)
    assert due.data is not None
    assert due.reason == "serving certificate renewed"
    assert planner.processes == 5
    await planner.plan(fresh.data, now=later, policy=POLICY, bundle_injected=True)
    assert planner.processes == 6


def test_the_planners_child_imports_neither_asyncio_nor_the_package_metadata() -> None:
    """The child imports what planning needs: not asyncio or subprocess, nor
    ``importlib.metadata``."""
    code = ("import sys, runpy\n"
            "sys.argv = ['planner']\n"
            "try:\n"
            "    runpy.run_module('lws_operator.kube.cert_planner', run_name='__main__')\n"
            "finally:\n"
            "    sys.stderr.write(repr(sorted(m for m in ('asyncio', 'importlib.metadata',\n"
            "        'subprocess') if m in sys.modules)))\n")
    pickled = subprocess.run(
        [sys.executable, "-c", "import pickle, sys, datetime as dt\n"
         "from lws_operator.logic.runtime import certs\n"
         "sys.stdout.buffer.write(pickle.dumps((None, dt.datetime.now(dt.UTC),\n"
         "    certs.CertPolicy(dns_names=('x.svc',)), False)))\n"],
        capture_output=True, check=True).stdout
    out = subprocess.run([sys.executable, "-c", code], input=pickled, capture_output=True,
                         check=True)
    assert out.stderr.decode().strip() == "[]"
    answered, not_afters = pickle.loads(out.stdout)
    assert list(not_afters) == [answered[0][2].data["tls.crt"]]
    assert [(injected, plan.data is None) for _, injected, plan in answered] == [
        (False, False), (False, True), (True, True)]


async def test_an_answer_names_the_served_certificates_not_after() -> None:
    """The expiry metric reads the served certificate's notAfter from the planner's answer:
    for the certificate a plan writes and for the one a plan that writes nothing leaves; a
    certificate no answer left is not known (a child reads it, ``not_after``)."""
    from cryptography import x509

    def leaf_not_after(data: dict[str, bytes]) -> float:
        return x509.load_pem_x509_certificate(
            data["tls.crt"]).not_valid_after_utc.timestamp()

    planner = OutOfProcessPlanner()
    fresh = await planner.plan(None, now=NOW, policy=POLICY, bundle_injected=False)
    assert fresh.data is not None
    assert planner.known_not_after(fresh.data["tls.crt"]) == leaf_not_after(fresh.data)

    other = {**fresh.data, "extra": b"x"}
    at_rest = await planner.plan(other, now=NOW, policy=POLICY, bundle_injected=True)
    assert at_rest.data is None
    assert planner.known_not_after(other["tls.crt"]) == leaf_not_after(fresh.data)
    assert planner.processes == 2

    elsewhere = self_signed(["localhost"], ["127.0.0.1"])
    assert planner.known_not_after(elsewhere["tls.crt"]) is None


async def test_a_failed_child_is_an_error_with_its_stderr() -> None:
    planner = OutOfProcessPlanner((sys.executable, "-c",
                                   "import sys; sys.stderr.write('boom'); sys.exit(3)"))
    with pytest.raises(PlannerFailed, match="exited 3: boom"):
        await planner.plan(None, now=NOW, policy=POLICY, bundle_injected=False)


def test_the_operators_modules_import_without_cryptography() -> None:
    code = ("import sys\n"
            "import lws_operator.controllers.runtime, lws_operator.admission.runtime\n"
            "import lws_operator.admission.metrics_server, lws_operator.kube.certs\n"
            "import lws_operator.kube.leaderelection, lws_operator.__main__\n"
            "print(sorted(m for m in sys.modules if m.startswith('cryptography')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_the_certificate_manager_plans_in_a_child() -> None:
    """A pass of ``WebhookCertManager`` asks its planner."""
    served: list[bytes] = []

    async def serve(cert: bytes, key: bytes) -> None:
        served.append(cert)

    planner = OutOfProcessPlanner()
    settings = CertSettings(namespace="lws-system", policy=POLICY)
    manager = WebhookCertManager(QuietKube(), settings, serve,  # type: ignore[arg-type]
                                 planner=planner)
    first = await manager.sync()
    assert first.reason == "created"
    assert planner.processes == 1
    assert len(served) == 1
    await manager.watched.stop()


def test_the_secure_metrics_self_signed_certificate_is_made_without_cryptography() -> None:
    """The chart's default (secure /metrics, no certificate mounted) makes a self-signed
    certificate at start: it is made by a child too, and serves."""
    code = ("import ssl, sys\n"
            "from lws_operator.admission.metrics_server import self_signed_context\n"
            "context = self_signed_context()\n"
            "assert isinstance(context, ssl.SSLContext)\n"
            "assert context.get_ca_certs() == [] and context.protocol\n"
            "print(sorted(m for m in sys.modules if m.startswith('cryptography')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_self_signed_certificate_names_the_host() -> None:
    from cryptography import x509

    data = self_signed(["localhost", "example"], ["127.0.0.1"])
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(names.get_values_for_type(x509.DNSName)) == ["example", "localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
