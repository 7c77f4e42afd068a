"""TPU environment variables for multi-host TPU slices (upstream's accelerators/tpu.go).

A multi-host TPU program needs to know every host of its slice, its own rank and the slice's
name before it starts; GKE's TPU runtime reads them from `TPU_WORKER_HOSTNAMES`, `TPU_WORKER_ID`,
`TPU_NAME`, `TPU_PROCESS_ADDRESSES` and `TPU_PROCESS_PORT`. A group is one slice, or, with
`subgroup-size`, each subgroup is one. The hosts are the pods' stable DNS names under the headless
Service, so the values are computable at admission from the pod's own name and annotations.

Two algorithms, exactly as upstream runs them:

* whole group: every TPU-requesting container (regular first, then init) is one process; each host
  appears once per such container, process ports count up from 8476;
* per subgroup: only the first TPU container gets variables, with one port.

Whether the *leader* holds TPUs decides whether it is a host of the slice: a leader pod that runs
this code requests TPUs by definition; a worker learns it from the `leader-requests-tpus`
annotation the pod controller writes into the worker template. The controller decides that with
`pod_requests_tpus` on the leader as the pod cache holds it, so what this module reads of a
container (its name and `google.com/tpu` limit and request) is declared in
`logic.reconcile.observed.POD_SPEC_SHAPE`, which the cache keeps.
"""

from __future__ import annotations

from typing import Any, Final

from lws_operator.api.constants import (
    ENV_TPU_NAME,
    ENV_TPU_PROCESS_ADDRESSES,
    ENV_TPU_PROCESS_PORT,
    ENV_TPU_WORKER_HOSTNAMES,
    ENV_TPU_WORKER_ID,
    LEADER_REQUESTS_TPUS_ANNOTATION,
    SUBGROUP_INDEX_LABEL,
    SUBGROUP_SIZE_ANNOTATION,
    TPU_DEFAULT_PORT,
    TPU_RESOURCE,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.view import is_leader
from lws_operator.logic.identity.keys import parse_int, split_ordinal, trunc_div, trunc_mod
from lws_operator.logic.objects.meta import host_name
from lws_operator.logic.objects.quantity import parse_quantity

# More host entries than this cannot fit in a Pod the API server would store (its request body
# limit is a few megabytes); building them would only exhaust the webhook's memory.
MAX_TPU_HOST_ENTRIES: Final = 65_536

_ALREADY_INJECTED: Final = frozenset({ENV_TPU_WORKER_HOSTNAMES, ENV_TPU_WORKER_ID})


def quantity_is_zero(quantity: Any) -> bool:
    """Whether a resource quantity (a JSON number or a string such as "4", "500m", "0Ki") is zero.

    Raises ValueError for something that is not a quantity: the API server would refuse to decode
    such a pod, so it must not silently count as "no TPUs".
    """
    value = parse_quantity(quantity)
    if value is not None:
        return value == 0
    raise ValueError(f"{quantity!r} is not a quantity")


def container_requests_tpus(container: dict[str, Any]) -> bool:
    """A non-zero `google.com/tpu` in the container's limits or, failing that, its requests."""
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        amounts = resources.get(section) or {}
        if TPU_RESOURCE in amounts:
            try:
                if not quantity_is_zero(amounts[TPU_RESOURCE]):
                    return True
            except ValueError as err:
                name = container.get("name") or ""
                raise ValueError(
                    f"invalid {TPU_RESOURCE} quantity in resources.{section} of container "
                    f"{name}: {err}"
                ) from err
    return False


def tpu_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The TPU-requesting containers, regular containers first, then init containers, in order.

    The dicts returned are the pod's own, so changing them changes the pod."""
    spec = pod.get("spec") or {}
    return [
        container
        for kind in ("containers", "initContainers")
        for container in spec.get(kind) or []
        if container_requests_tpus(container)
    ]


def pod_requests_tpus(pod: dict[str, Any]) -> bool:
    """Whether any container or init container of the pod requests TPUs."""
    return bool(tpu_containers(pod))


def _env_value(container: dict[str, Any], name: str) -> str | None:
    """The value of the container's first env entry called `name` ("" when it uses valueFrom),
    or None when there is none."""
    for entry in container.get("env") or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return str(entry.get("value") or "")
    return None


def _already_injected(container: dict[str, Any]) -> bool:
    return any(
        isinstance(entry, dict) and entry.get("name") in _ALREADY_INJECTED
        for entry in container.get("env") or []
    )


def _append_env(container: dict[str, Any], entries: list[tuple[str, str]]) -> None:
    env = container.get("env")
    if env is None:
        env = container["env"] = []
    env.extend({"name": name, "value": value} for name, value in entries)


def _check_host_count(count: int, pod_name: str) -> None:
    if count > MAX_TPU_HOST_ENTRIES:
        raise ValueError(
            f"TPU host list of {count} entries for pod {pod_name} exceeds "
            f"{MAX_TPU_HOST_ENTRIES}: the group or subgroup size is too large"
        )


def _split_worker_name(pod_name: str) -> tuple[str, int]:
    """A worker's leader name and ordinal; an unparsable name or an empty parent rejects."""
    parsed = split_ordinal(pod_name)
    if parsed is None or not parsed[0]:
        raise ValueError(f"parsing parent name from pod {pod_name}")
    return parsed


def add_tpu_env(pod: dict[str, Any], size: int) -> None:
    """Append the TPU variables to the pod's TPU containers (in place); `size` is the group size.

    Nothing happens when the pod requests no TPUs or when the (first) TPU container already has
    `TPU_WORKER_HOSTNAMES` or `TPU_WORKER_ID`, which makes the step idempotent. Raises ValueError
    with the rejection message when the pod cannot be interpreted.
    """
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if SUBGROUP_SIZE_ANNOTATION in annotations:
        _add_subgroup_env(pod)
    else:
        _add_group_env(pod, size)


def _hosts(leader_name: str, subdomain: str, with_leader: bool, workers: range) -> list[str]:
    hosts = [f"{leader_name}.{subdomain}"] if with_leader else []
    hosts.extend(f"{leader_name}-{k}.{subdomain}" for k in workers)
    return hosts


def _add_group_env(pod: dict[str, Any], size: int) -> None:
    """Whole-group slice: hosts are the leader (when it holds TPUs) and workers 1..size-1, each
    repeated once per TPU container; container i of pod rank r gets id `r * containers + i`."""
    containers = tpu_containers(pod)
    if not containers or _already_injected(containers[0]):
        return
    metadata = pod.get("metadata") or {}
    pod_name = metadata.get("name") or ""
    annotations = metadata.get("annotations") or {}
    subdomain = (pod.get("spec") or {}).get("subdomain") or ""
    leader_has_tpus = annotations.get(LEADER_REQUESTS_TPUS_ANNOTATION) == "true"

    if is_leader(pod):
        leader_name, rank = host_name(pod), 0  # a Hash leader has no name yet, only a host
    else:
        leader_name, rank = _split_worker_name(pod_name)
        if not leader_has_tpus:
            rank -= 1

    count = len(containers)
    with_leader = leader_has_tpus or is_leader(pod)
    _check_host_count(count * (max(size - 1, 0) + int(with_leader)), pod_name)
    ports = [
        port
        if (port := _env_value(c, ENV_TPU_PROCESS_PORT)) is not None
        else str(TPU_DEFAULT_PORT + i)
        for i, c in enumerate(containers)
    ]
    hosts: list[str] = []
    addresses: list[str] = []
    for host in _hosts(leader_name, subdomain, with_leader, range(1, size)):
        hosts.extend([host] * count)
        addresses.extend(f"{host}:{port}" for port in ports)

    for i, container in enumerate(containers):
        had_port = _env_value(container, ENV_TPU_PROCESS_PORT) is not None
        entries = [
            (ENV_TPU_WORKER_HOSTNAMES, ",".join(hosts)),
            (ENV_TPU_WORKER_ID, str(rank * count + i)),
            (ENV_TPU_NAME, leader_name),
            (ENV_TPU_PROCESS_ADDRESSES, ",".join(addresses)),
        ]
        if not had_port:
            entries.append((ENV_TPU_PROCESS_PORT, ports[i]))
        _append_env(container, entries)


def _parse_required(source: dict[str, Any], kind: str, key: str, pod_name: str) -> int:
    """Parse the decimal under `key` of the pod's labels or annotations (`kind` says which)."""
    if key not in source:
        raise ValueError(f"parsing {kind} {key} for pod {pod_name}: {kind} not found")
    value = source[key]
    try:
        return parse_int(str(value))
    except ValueError as err:
        raise ValueError(f'parsing {kind} {key}="{value}" for pod {pod_name}: {err}') from None


def _add_subgroup_env(pod: dict[str, Any]) -> None:
    """Per-subgroup slice: only the first TPU container gets variables.

    Quirk kept from upstream: a LeaderExcluded leader that requests TPUs has no `subgroup-index`
    label, so it is rejected here. A subgroup size of 0, on which upstream would panic, is rejected
    with a message instead.
    """
    containers = tpu_containers(pod)
    if not containers or _already_injected(containers[0]):
        return
    container = containers[0]
    metadata = pod.get("metadata") or {}
    pod_name = metadata.get("name") or ""
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    subdomain = (pod.get("spec") or {}).get("subdomain") or ""
    leader_has_tpus = annotations.get(LEADER_REQUESTS_TPUS_ANNOTATION) == "true"

    size = _parse_required(annotations, "annotation", SUBGROUP_SIZE_ANNOTATION, pod_name)
    index = _parse_required(labels, "label", SUBGROUP_INDEX_LABEL, pod_name)
    worker = _parse_required(labels, "label", WORKER_INDEX_LABEL, pod_name)
    if size == 0:
        raise ValueError(f"annotation {SUBGROUP_SIZE_ANNOTATION} must not be 0 for pod {pod_name}")

    leader = is_leader(pod)
    rank = trunc_mod(worker, size)
    if not leader and not leader_has_tpus:
        # Without a TPU leader, TPU subgroups are cut from the workers alone, counted from 1.
        rank = trunc_mod(worker - 1, size)
        index = trunc_div(worker - 1, size)
    port = _env_value(container, ENV_TPU_PROCESS_PORT)

    start, end = size * index + 1, size * (index + 1)
    if leader:
        leader_name, with_leader, end = host_name(pod), True, end - 1
    else:
        leader_name, _ = _split_worker_name(pod_name)
        with_leader = leader_has_tpus and index == 0
        if leader_has_tpus:
            # The TPU leader takes the first place of subgroup 0, shifting every later subgroup.
            end -= 1
            if index != 0:
                start -= 1
    _check_host_count(max(end - start + 1, 0) + int(with_leader), pod_name)
    hosts = _hosts(leader_name, subdomain, with_leader, range(start, end + 1))
    effective_port = port if port is not None else str(TPU_DEFAULT_PORT)
    entries = [
        (ENV_TPU_WORKER_HOSTNAMES, ",".join(hosts)),
        (ENV_TPU_WORKER_ID, str(rank)),
        (ENV_TPU_NAME, leader_name),
        (ENV_TPU_PROCESS_ADDRESSES, ",".join(f"{host}:{effective_port}" for host in hosts)),
    ]
    if port is None:
        entries.append((ENV_TPU_PROCESS_PORT, effective_port))
    _append_env(container, entries)
