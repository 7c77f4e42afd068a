"""Defaulting of LeaderWorkerSets, as the mutating webhook applies it on CREATE and UPDATE.

Two layers give an object its defaults (upstream's webhook Default (leaderworkerset_webhook.go)):
the CRD's structural defaults, applied by the
API server before admission, then this function. It repeats the structural ones too, so an
object is complete even if the CRD was installed without them (an older or hand-edited CRD);
on a normal install they are no-ops.

Upstream's ``Default`` (leaderworkerset_webhook.go) in order: an empty ``restartPolicy`` becomes
``RecreateGroupOnPodRestart`` and the deprecated ``Default`` becomes ``None``; the rollout
strategy gets type ``RollingUpdate`` and, if it has none, the configuration
``{maxUnavailable: 1, maxSurge: 0, partition: 0}``; ``networkConfig.subdomainPolicy`` becomes
``Shared``. Because defaulting runs before validation, an update that nulls ``subdomainPolicy``
is re-defaulted rather than rejected, as upstream's integration tests expect.

The LWS docs add: ``groupIdentity: Ordinal``, ``podTerminationPolicy: Sequential``,
``groupReplacementPolicy: PostTermination``; ``restartBackoff`` base 10 s and cap 300 s, only
when the block is present; and ``scheduling: {}`` materialised as the replica level with a gang
policy, so that the stored object says which level is active (the level is immutable and must be
compared on update).
"""

from __future__ import annotations

import copy
from typing import Any

DEFAULT_RESTART_POLICY = "RecreateGroupOnPodRestart"
DEFAULT_ROLLING_UPDATE: dict[str, Any] = {"maxUnavailable": 1, "maxSurge": 0, "partition": 0}
DEFAULT_BACKOFF_BASE_SECONDS = 10
DEFAULT_BACKOFF_CAP_SECONDS = 300
_GANG: dict[str, Any] = {"gang": {}}
_LEVEL_FIELDS = ("schedulingPolicy", "schedulingConstraints", "disruptionMode", "resourceClaims")


def _child(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """``parent[key]`` as a dict, created when missing or null.

    A value of another type (``rolloutStrategy: "x"``) is left alone, and the defaults go into
    a detached dict: this webhook runs before the CRD schema is checked, and replacing the
    value would turn a request the schema must reject into an accepted, defaulted object
    (``scheduling: "x"`` would even switch gang scheduling on)."""
    value = parent.get(key)
    if isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    if value is None:
        parent[key] = out
    return out


def _set_default(obj: dict[str, Any], key: str, value: Any) -> None:
    if obj.get(key) in (None, ""):
        obj[key] = copy.deepcopy(value)


def _default_scheduling(scheduling: dict[str, Any]) -> None:
    """Make the active level explicit and give it a gang policy when it has none."""
    whole_lws = any(scheduling.get(f) is not None for f in _LEVEL_FIELDS)
    replica = scheduling.get("replica")
    if whole_lws:
        if replica is None:
            _set_default(scheduling, "schedulingPolicy", _GANG)
        return  # mixed levels are left for validation to reject
    replica = _child(scheduling, "replica")
    roles = [r for r in ("leader", "worker") if isinstance(replica.get(r), dict)]
    if roles:
        if not any(replica.get(f) is not None for f in _LEVEL_FIELDS):
            for role in roles:
                _set_default(replica[role], "schedulingPolicy", _GANG)
        return
    _set_default(replica, "schedulingPolicy", _GANG)


def apply_defaults(lws: dict[str, Any]) -> dict[str, Any]:
    """Return a defaulted deep copy of the LeaderWorkerSet ``lws`` (never modifies it)."""
    out = copy.deepcopy(lws)
    spec = _child(out, "spec")
    _set_default(spec, "replicas", 1)
    _set_default(spec, "startupPolicy", "LeaderCreated")
    _set_default(spec, "groupIdentity", "Ordinal")
    _set_default(spec, "podTerminationPolicy", "Sequential")
    _set_default(spec, "groupReplacementPolicy", "PostTermination")

    template = _child(spec, "leaderWorkerTemplate")
    _set_default(template, "size", 1)
    if template.get("restartPolicy") == "Default":
        template["restartPolicy"] = "None"
    _set_default(template, "restartPolicy", DEFAULT_RESTART_POLICY)
    if isinstance(template.get("subGroupPolicy"), dict):
        _set_default(template["subGroupPolicy"], "subGroupPolicyType", "LeaderWorker")
    if isinstance(template.get("restartBackoff"), dict):
        _set_default(template["restartBackoff"], "baseSeconds", DEFAULT_BACKOFF_BASE_SECONDS)
        _set_default(template["restartBackoff"], "capSeconds", DEFAULT_BACKOFF_CAP_SECONDS)

    rollout = _child(spec, "rolloutStrategy")
    _set_default(rollout, "type", "RollingUpdate")
    if rollout["type"] == "RollingUpdate":
        config = rollout.get("rollingUpdateConfiguration")
        if config is None:
            rollout["rollingUpdateConfiguration"] = dict(DEFAULT_ROLLING_UPDATE)
        elif isinstance(config, dict):  # another type is the schema's to reject (see _child)
            for key, value in DEFAULT_ROLLING_UPDATE.items():
                _set_default(config, key, value)

    network = _child(spec, "networkConfig")
    _set_default(network, "subdomainPolicy", "Shared")

    if isinstance(spec.get("scheduling"), dict):
        _default_scheduling(spec["scheduling"])
    return out
