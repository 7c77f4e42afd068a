"""LeaderWorkerSet bodies as the validation tests write them, shared by the unit tests of
``api.validation`` and the api-tier admission tests (tests/integration/test_lws_admission.py),
so both build "a set as upstream left it in etcd" from the same upstream defaults.

Written from upstream's code, not taken from ``lws_operator.api.defaults``: the tests compare the
operator's defaulting against these.
"""

from __future__ import annotations

from typing import Any


def ruc(**config: Any) -> dict[str, Any]:
    """A RollingUpdate ``rolloutStrategy`` with ``config`` as its configuration."""
    return {"type": "RollingUpdate", "rollingUpdateConfiguration": config}


def set_fields(body: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``body`` with each of ``fields`` set in its spec; a key ``t_<field>`` goes into
    ``leaderWorkerTemplate`` instead. Returns ``body`` (changed in place)."""
    for key, value in fields.items():
        if key.startswith("t_"):
            body["spec"]["leaderWorkerTemplate"][key[2:]] = value
        else:
            body["spec"][key] = value
    return body


def upstream_defaults() -> dict[str, Any]:
    """Upstream's defaults (leaderworkerset_webhook.go) as its CRD and defaulting webhook write
    them into etcd, in :func:`set_fields` form; none of the LWS docs' additions (``groupIdentity``,
    ``podTerminationPolicy``, ``groupReplacementPolicy``). A new dict on every call."""
    return {"startupPolicy": "LeaderCreated",
            "rolloutStrategy": ruc(maxUnavailable=1, maxSurge=0, partition=0),
            "networkConfig": {"subdomainPolicy": "Shared"},
            "t_restartPolicy": "RecreateGroupOnPodRestart"}
