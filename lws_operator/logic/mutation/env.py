"""The LWS environment variables every container of a group sees (upstream's AddLWSVariables
(pod_utils.go)).

Programs in a group find each other through `LWS_LEADER_ADDRESS` (the leader's stable DNS name
under the headless Service), `LWS_GROUP_SIZE` and `LWS_WORKER_INDEX`. They are injected into
regular *and* init containers, always ahead of the user's own variables: a variable may refer to
an earlier one with `$(LWS_LEADER_ADDRESS)`, and that only resolves if it comes first. A user value
under one of these names is replaced, never kept.

Pods of a DisaggregatedSet's LeaderWorkerSets also get the four documented ``DISAGGREGATEDSET_*``
variables (:func:`add_disaggregatedset_env`), which upstream's controller never injects.
"""

from __future__ import annotations

from typing import Any

from lws_operator.api import disaggregated
from lws_operator.api.constants import (
    ENV_GROUP_SIZE,
    ENV_LEADER_ADDRESS,
    ENV_WORKER_INDEX,
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    SIZE_ANNOTATION,
    WORKER_INDEX_LABEL,
)


def object_ref(pod: dict[str, Any]) -> str:
    """`<namespace>/<name>`, or just `<name>` without a namespace, as Kubernetes logs objects."""
    metadata = pod.get("metadata") or {}
    name = metadata.get("name") or ""
    namespace = metadata.get("namespace") or ""
    return f"{namespace}/{name}" if namespace else name


def lws_env(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The three variables, in injection order, for an already-labelled pod.

    The leader address is built from the set name and the group index, not from the leader pod's
    actual name: `<lws>-<i>.<subdomain>.<namespace>`. Raises ValueError naming the first missing
    label or annotation.
    """
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}

    def missing(what: str) -> ValueError:
        return ValueError(
            f"Failure constructing environment variables, no {what} found for pod {object_ref(pod)}"
        )

    if NAME_LABEL not in labels:
        raise missing("name label")
    if GROUP_INDEX_LABEL not in labels:
        raise missing("group index label")
    if SIZE_ANNOTATION not in annotations:
        raise missing("size annotation")
    if WORKER_INDEX_LABEL not in labels:
        raise missing("worker index label")
    subdomain = (pod.get("spec") or {}).get("subdomain") or ""
    namespace = metadata.get("namespace") or ""
    address = f"{labels[NAME_LABEL]}-{labels[GROUP_INDEX_LABEL]}.{subdomain}.{namespace}"
    return [
        {"name": ENV_LEADER_ADDRESS, "value": address},
        {"name": ENV_GROUP_SIZE, "value": annotations[SIZE_ANNOTATION]},
        {"name": ENV_WORKER_INDEX, "value": labels[WORKER_INDEX_LABEL]},
    ]


def add_lws_env(pod: dict[str, Any]) -> None:
    """Put the LWS variables first in every container and init container (in place).

    The user's other entries keep their order; entries named like one of ours are dropped.
    Upstream additionally collapses duplicate user entries of other names; we leave those alone,
    as upstream's AddLWSVariables (pod_utils.go) states the rule.
    """
    injected = lws_env(pod)
    ours = {entry["name"] for entry in injected}
    spec = pod.get("spec") or {}
    for kind in ("containers", "initContainers"):
        for container in spec.get(kind) or []:
            kept = [
                entry
                for entry in container.get("env") or []
                if not (isinstance(entry, dict) and entry.get("name") in ours)
            ]
            container["env"] = [dict(entry) for entry in injected] + kept


def disaggregatedset_env(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The documented DisaggregatedSet variables for a pod carrying the DisaggregatedSet name label
    (none otherwise), valued from the pod's own labels: name, role, slice and revision. The
    labels come from the pod template the DisaggregatedSet controller wrote, so each pod tells
    its own revision even while two revisions serve side by side. A pod of a LeaderWorkerSet
    made before slices existed has no slice label: it is slice 0. A variable whose label is
    missing (only a hand-made pod lacks them) is left out rather than given a made-up value."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if disaggregated.NAME_LABEL not in labels:
        return []
    values = {
        disaggregated.ENV_NAME: labels.get(disaggregated.NAME_LABEL),
        disaggregated.ENV_ROLE: labels.get(disaggregated.ROLE_LABEL),
        disaggregated.ENV_SLICE: labels.get(disaggregated.SLICE_LABEL) or "0",
        disaggregated.ENV_REVISION: labels.get(disaggregated.REVISION_LABEL),
    }
    return [{"name": name, "value": str(value)} for name, value in values.items()
            if value is not None]


def add_disaggregatedset_env(pod: dict[str, Any]) -> None:
    """Add the DisaggregatedSet variables to every container and init container (in place),
    after the LWS ones (call :func:`add_lws_env` first) and before the user's, so the user's
    variables may refer to them with ``$(DISAGGREGATEDSET_ROLE)``.

    Unlike the LWS variables, a value the user set under one of these names is kept and ours is
    not added for that container: these describe the pod to the program, nothing of the group
    depends on them, so a user's override is honoured. That also makes a second pass over an
    admitted pod a no-op."""
    injected = disaggregatedset_env(pod)
    if not injected:
        return
    lws_names = {ENV_LEADER_ADDRESS, ENV_GROUP_SIZE, ENV_WORKER_INDEX}
    spec = pod.get("spec") or {}
    for kind in ("containers", "initContainers"):
        for container in spec.get(kind) or []:
            env = list(container.get("env") or [])
            present = {entry.get("name") for entry in env if isinstance(entry, dict)}
            at = 0
            while (at < len(env) and isinstance(env[at], dict)
                   and env[at].get("name") in lws_names):
                at += 1
            added = [dict(entry) for entry in injected if entry["name"] not in present]
            container["env"] = env[:at] + added + env[at:]
