"""The webhook certificates' rotation plan, decided in a short-lived process of its own.

``logic.runtime.certs.plan`` parses, checks and makes certificates with ``cryptography``, whose Rust
extension and modules stay resident in whichever process imports them (the figure is in
docs/performance.md), for a decision taken at
start and then about once a day, when a renewal falls due or the Secret changes. So the operator
process never imports it: ``OutOfProcessPlanner`` runs ``python -m
lws_operator.kube.cert_planner`` (the same interpreter and package, as the admission child) with
the plan's arguments, and reads the plan back. Both ends are this package, so the arguments and
the plan travel pickled over the child's stdin and stdout.

A child costs CPU at every start, so a question asked again gets the answer it
got: the plan for unchanged Secret data, policy and injection is the same until its
``next_check`` (the moment the clock alone can change it, ``logic.runtime.certs``), and a plan that
changes nothing is all such a pass asks for. A plan that writes is never reused: a pass that
fails to write it plans afresh, as before.

A plan that writes is followed by the question of the pass after it: the Secret holding what
was written, with the caBundles injected or not yet. The child answers those too, with the same
clock (``FOLLOW_UPS``), so the next pass finds its answer known instead of starting a second
child at the moment the admission process has just started (a child holds memory of its own
while it lives, and the operator's memory is counted as the sum over its processes). The
answers are the ones a child asked then would give, by the rule above; an input that differs
(another key in the Secret, a write that failed) asks a child as before.

Each answer also carries the notAfter of the serving certificate of the Secret it leaves (the
written data, or the data asked about when nothing is written): the expiry metric wants it for
the certificate about to be served, and reading it had been a second child at every start, alive
while the admission process starts (``known_not_after``; ``not_after`` still asks a child for a
certificate no answer named, one mounted from outside).

The child imports only what planning needs (``asyncio`` and ``subprocess`` are the parent's).
"""

from __future__ import annotations

import datetime as dt
import pickle
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from lws_operator.logic.runtime import certs


@dataclass(frozen=True)
class Question:
    """The arguments of one ``logic.runtime.certs.plan`` call."""

    data: dict[str, bytes] | None
    now: dt.datetime
    policy: certs.CertPolicy
    bundle_injected: bool

    def inputs(self) -> tuple[dict[str, bytes] | None, certs.CertPolicy, bool]:
        """What the answer depends on besides the clock."""
        return (self.data, self.policy, self.bundle_injected)


class PlannerFailed(RuntimeError):
    """The planning process failed (its exit status and the end of its stderr)."""


# The injection states of the pass after a write: the Secret as written, with the webhook
# configurations not yet trusting its bundle, and trusting it.
FOLLOW_UPS = (False, True)

# What the child answers: (data, bundle_injected, plan) per question, the asked one first (plain
# tuples: the child runs this module as ``__main__``, whose classes the parent cannot unpickle).
Answers = list[tuple[dict[str, bytes] | None, bool, certs.Plan]]
# The notAfter (Unix seconds) of each serving certificate the answers leave in the Secret, by PEM.
NotAfters = dict[bytes, float]


def answers(data: dict[str, bytes] | None, now: dt.datetime, policy: certs.CertPolicy,
            bundle_injected: bool) -> Answers:
    """The plan for the question asked and, when it writes, for the follow-up questions
    (module docstring), all with the clock ``now``."""
    plan = certs.plan(data, now=now, policy=policy, bundle_injected=bundle_injected)
    out: Answers = [(data, bundle_injected, plan)]
    if plan.data is not None:
        out += [(plan.data, injected,
                 certs.plan(plan.data, now=now, policy=policy, bundle_injected=injected))
                for injected in FOLLOW_UPS]
    return out


def served_not_afters(answered: Answers) -> NotAfters:
    """The notAfter of the serving certificate each answer leaves in the Secret (module
    docstring). A plan that writes nothing found the data asked about usable, so its
    certificate parses."""
    out: NotAfters = {}
    for data, _, plan in answered:
        left = plan.data if plan.data is not None else data
        pem = (left or {}).get(certs.TLS_CERT_KEY)
        if pem and pem not in out:
            out[pem] = _not_after(pem)
    return out


class OutOfProcessPlanner:
    """``logic.runtime.certs.plan``, asked of a child process (module docstring)."""

    def __init__(self, command: tuple[str, ...] = (sys.executable, "-m", __name__)) -> None:
        self.command = command
        self.processes = 0  # children run so far
        # The last child's answers (the question asked, then its follow-ups).
        self._known_answers: list[tuple[Question, certs.Plan]] = []
        # The notAfter of the serving certificates those answers leave (module docstring).
        self._not_afters: NotAfters = {}

    def known_not_after(self, cert_pem: bytes) -> float | None:
        """The notAfter of ``cert_pem`` if the last child's answers left it in the Secret."""
        return self._not_afters.get(cert_pem)

    def _known(self, question: Question) -> certs.Plan | None:
        """A known answer that holds for ``question`` too: the same inputs but the clock, a
        plan that writes nothing, and a clock still before its ``next_check``."""
        for asked, plan in self._known_answers:
            if plan.data is None and question.now < plan.next_check \
                    and asked.inputs() == question.inputs():
                return plan
        return None

    async def plan(self, data: Mapping[str, bytes] | None, *, now: dt.datetime,
                   policy: certs.CertPolicy, bundle_injected: bool) -> certs.Plan:
        import asyncio  # the parent's only (module docstring)

        question = Question(None if data is None else dict(data), now, policy, bundle_injected)
        known = self._known(question)
        if known is not None:
            return known
        process = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        self.processes += 1
        # A tuple, not the Question: the child runs this module as ``__main__``.
        out, err = await process.communicate(pickle.dumps(
            (question.data, question.now, question.policy, question.bundle_injected)))
        if process.returncode != 0:
            raise PlannerFailed(f"certificate planner exited {process.returncode}: "
                                f"{err.decode(errors='replace')[-2000:]}")
        reply = pickle.loads(out)
        answered, not_afters = reply if isinstance(reply, tuple) and len(reply) == 2 else (
            None, None)
        if not (isinstance(answered, list) and answered
                and all(isinstance(a, tuple) and len(a) == 3 and isinstance(a[2], certs.Plan)
                        for a in answered) and isinstance(not_afters, dict)):
            raise PlannerFailed(f"certificate planner answered {type(reply).__name__}")
        self._known_answers = [(Question(d, now, policy, injected), p)
                               for d, injected, p in answered]
        self._not_afters = not_afters
        return answered[0][2]  # type: ignore[no-any-return]


SELF_SIGNED = "self-signed"
NOT_AFTER = "not-after"
# How long a self-signed certificate of :func:`self_signed` holds (never rotated: it lives as
# long as the process that made it).
SELF_SIGNED_VALIDITY = dt.timedelta(days=3650)


def self_signed(dns_names: list[str], ip_addresses: list[str],
                command: tuple[str, ...] = (sys.executable, "-m", __name__)) -> dict[str, bytes]:
    """A fresh CA and a serving certificate it signed for ``dns_names`` and ``ip_addresses``,
    made by a child for the reason the rotation plan is (module docstring): the secure
    ``/metrics`` endpoint's certificate when none is mounted, the chart's default. Encoded as
    ``logic.runtime.certs.encode`` does (``tls.crt``, ``tls.key``, ``ca.crt``). Blocking: it is
    asked once, when the metrics endpoint starts."""
    import subprocess  # the parent's only (module docstring)

    done = subprocess.run([*command, SELF_SIGNED], input=pickle.dumps((dns_names, ip_addresses)),
                          capture_output=True, check=False, timeout=60)
    if done.returncode != 0:
        raise PlannerFailed(f"certificate planner exited {done.returncode}: "
                            f"{done.stderr.decode(errors='replace')[-2000:]}")
    data = pickle.loads(done.stdout)
    if not isinstance(data, dict):
        raise PlannerFailed(f"certificate planner answered {type(data).__name__}")
    return data


def _make_self_signed(dns_names: list[str], ip_addresses: list[str]) -> dict[str, bytes]:
    now = dt.datetime.now(dt.UTC)
    ca, ca_key = certs.new_ca(now, SELF_SIGNED_VALIDITY)
    cert, key = certs.new_serving_cert(ca, ca_key, now, SELF_SIGNED_VALIDITY,
                                       dns_names=dns_names, ip_addresses=ip_addresses)
    return certs.encode(certs.CertState(cas=(ca,), ca_key=ca_key, cert=cert, key=key))


async def not_after(cert_pem: bytes,
                    command: tuple[str, ...] = (sys.executable, "-m", __name__)) -> float:
    """The notAfter of the first certificate of ``cert_pem``, in Unix seconds, read by a child
    for the reason the rotation plan is (module docstring): asked when a certificate starts
    being served, for the expiry metric."""
    import asyncio  # the parent's only (module docstring)

    child = await asyncio.create_subprocess_exec(
        *command, NOT_AFTER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(child.communicate(cert_pem), timeout=60)
    if child.returncode != 0:
        raise PlannerFailed(f"certificate planner exited {child.returncode}: "
                            f"{err.decode(errors='replace')[-2000:]}")
    return float(out)


def _not_after(cert_pem: bytes) -> float:
    from cryptography import x509

    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc.timestamp()


def main() -> None:
    # A terminal's Ctrl-C, or a SIGTERM sent to the operator's whole process group, reaches
    # this child too; it answers within moments anyway, and the parent, which handles those
    # signals, still wants the answer (killed, it reported a planner failure at every stop).
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if sys.argv[1:] == [NOT_AFTER]:
        sys.stdout.write(repr(_not_after(sys.stdin.buffer.read())))
        return
    if sys.argv[1:] == [SELF_SIGNED]:
        dns_names, ip_addresses = pickle.load(sys.stdin.buffer)
        sys.stdout.buffer.write(pickle.dumps(_make_self_signed(dns_names, ip_addresses)))
        return
    data, now, policy, bundle_injected = pickle.load(sys.stdin.buffer)
    answered = answers(data, now, policy, bundle_injected)
    sys.stdout.buffer.write(pickle.dumps((answered, served_not_afters(answered))))


if __name__ == "__main__":
    main()
