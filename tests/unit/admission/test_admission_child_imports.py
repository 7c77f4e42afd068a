"""What the admission process imports (``admission.child``): what it serves with and nothing of
the controllers' stack, so that it stays small. One interpreter started, about 1 s."""

from __future__ import annotations

import json
import subprocess
import sys

# Never in the admission process: the controllers' framework and API client, the validation
# models, aiohttp (it parses HTTP/1.1 with httptools, ``admission.http_server``), and
# prometheus_client with the HTTP server its package imports (it counts in ``admission.counts``).
ABSENT = ("kopf", "kubernetes", "pydantic", "aiohttp", "multidict", "yarl", "importlib.metadata",
          "prometheus_client", "http.server", "email")
# What it serves with.
PRESENT = ("httptools", "ssl", "lws_operator.admission.counts", "lws_operator.logic.mutation.pod",
           "lws_operator.api.validation")


def test_the_admission_process_imports_only_what_it_serves_with() -> None:
    script = ("import json, sys; import lws_operator.admission.child; "
              "print(json.dumps(sorted(sys.modules)))")
    modules = set(json.loads(subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout))
    assert not {m for m in modules if any(m == a or m.startswith(f"{a}.") for a in ABSENT)}
    assert set(PRESENT) <= modules
