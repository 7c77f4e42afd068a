"""The webhook certificates' rotation plan, decided in a short-lived process of its own.

``logic.certs.plan`` parses, checks and makes certificates with ``cryptography``, whose Rust
extension and modules keep about 10 MiB resident in whichever process imports them (measured:
the operator's modules import in 59.7 MiB without it, 70.0 MiB with it), for a decision taken at
start and then about once a day, when a renewal falls due or the Secret changes. So the operator
process never imports it: ``OutOfProcessPlanner`` runs ``python -m
lws_operator.kube.cert_planner`` (the same interpreter and package, as the admission child) with
the plan's arguments, and reads the plan back. Both ends are this package, so the arguments and
the plan travel pickled over the child's stdin and stdout.

A child costs about a quarter of a second of CPU, so a question asked again gets the answer it
got: the plan for unchanged Secret data, policy and injection is the same until its
``next_check`` (the moment the clock alone can change it, ``logic.certs``), and a plan that
changes nothing is all such a pass asks for. A plan that writes is never reused: a pass that
fails to write it plans afresh, as before.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import pickle
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from lws_operator.logic import certs


@dataclass(frozen=True)
class Question:
    """The arguments of one ``logic.certs.plan`` call."""

    data: dict[str, bytes] | None
    now: dt.datetime
    policy: certs.CertPolicy
    bundle_injected: bool

    def inputs(self) -> tuple[dict[str, bytes] | None, certs.CertPolicy, bool]:
        """What the answer depends on besides the clock."""
        return (self.data, self.policy, self.bundle_injected)


class PlannerFailed(RuntimeError):
    """The planning process failed (its exit status and the end of its stderr)."""


class OutOfProcessPlanner:
    """``logic.certs.plan``, asked of a child process (module docstring)."""

    def __init__(self, command: tuple[str, ...] = (sys.executable, "-m", __name__)) -> None:
        self.command = command
        self.processes = 0  # children run so far
        self._last: tuple[Question, certs.Plan] | None = None

    def _known(self, question: Question) -> certs.Plan | None:
        """The last answer when it holds for ``question`` too: the same inputs but the clock,
        a plan that writes nothing, and a clock still before its ``next_check``."""
        if self._last is None:
            return None
        asked, plan = self._last
        if plan.data is not None or question.now >= plan.next_check \
                or asked.inputs() != question.inputs():
            return None
        return plan

    async def plan(self, data: Mapping[str, bytes] | None, *, now: dt.datetime,
                   policy: certs.CertPolicy, bundle_injected: bool) -> certs.Plan:
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
        plan = pickle.loads(out)
        if not isinstance(plan, certs.Plan):
            raise PlannerFailed(f"certificate planner answered {type(plan).__name__}")
        self._last = (question, plan)
        return plan


SELF_SIGNED = "self-signed"
# How long a self-signed certificate of :func:`self_signed` holds (never rotated: it lives as
# long as the process that made it).
SELF_SIGNED_VALIDITY = dt.timedelta(days=3650)


def self_signed(dns_names: list[str], ip_addresses: list[str],
                command: tuple[str, ...] = (sys.executable, "-m", __name__)) -> dict[str, bytes]:
    """A fresh CA and a serving certificate it signed for ``dns_names`` and ``ip_addresses``,
    made by a child for the reason the rotation plan is (module docstring): the secure
    ``/metrics`` endpoint's certificate when none is mounted, the chart's default. Encoded as
    ``logic.certs.encode`` does (``tls.crt``, ``tls.key``, ``ca.crt``). Blocking: it is asked
    once, when the metrics endpoint starts."""
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


def main() -> None:
    if sys.argv[1:] == [SELF_SIGNED]:
        dns_names, ip_addresses = pickle.load(sys.stdin.buffer)
        sys.stdout.buffer.write(pickle.dumps(_make_self_signed(dns_names, ip_addresses)))
        return
    data, now, policy, bundle_injected = pickle.load(sys.stdin.buffer)
    plan = certs.plan(data, now=now, policy=policy, bundle_injected=bundle_injected)
    sys.stdout.buffer.write(pickle.dumps(plan))


if __name__ == "__main__":
    main()
