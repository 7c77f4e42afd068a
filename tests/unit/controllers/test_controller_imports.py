"""The DisaggregatedSet controller stands on its own: it shares the runner and the cached-name
lookup (``controllers.passes``, ``controllers.in_namespace``) with the LeaderWorkerSet
controller, but importing it does not import that controller nor its pass."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json
import sys
import lws_operator.controllers.disaggregatedset
print(json.dumps(sorted(m for m in sys.modules if m.startswith("lws_operator"))))
"""


def test_the_disaggregatedset_controller_does_not_import_the_leaderworkerset_one() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True,
                         text=True).stdout
    modules = set(json.loads(out))
    assert "lws_operator.controllers.disaggregatedset" in modules
    for module in ("lws_operator.controllers.leaderworkerset",
                   "lws_operator.logic.leaderworkerset.pipeline",
                   "lws_operator.logic.rollout.leader_step"):
        assert module not in modules, module


OPERATOR = """
import json
import sys
import lws_operator.__main__, lws_operator.controllers.runtime, lws_operator.admission.runtime
import lws_operator.admission.health, lws_operator.admission.metrics_server
import lws_operator.kube.leaderelection
print(json.dumps(sorted(sys.modules)))
"""
# What ``lws-operator run`` never uses, so never imports: kopf serves only the signal watches
# (``kube.signal_watch``), which an install with every CRD never starts; the webhooks' review,
# mutation and HTTP server run in the admission child (``admission.runtime`` imports them only
# for an in-process server). ``lws-operator run`` imports them before it forks that child, so
# that the two processes hold them once (``admission.fork``), but none of the operator's own
# modules does.
NOT_IN_THE_OPERATOR = ("kopf", "httptools", "jsonpatch", "lws_operator.admission.review",
                       "lws_operator.admission.server", "lws_operator.admission.http_server",
                       "lws_operator.logic.mutation.pod")


def test_the_operator_imports_neither_kopf_nor_the_webhooks_own_modules() -> None:
    modules = set(json.loads(subprocess.run(
        [sys.executable, "-c", OPERATOR], check=True, capture_output=True, text=True).stdout))
    assert "lws_operator.kube.watch" in modules
    assert not {m for m in modules
                if any(m == a or m.startswith(f"{a}.") for a in NOT_IN_THE_OPERATOR)}
