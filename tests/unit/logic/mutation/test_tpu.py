"""TPU detection and TPU environment variables, both algorithms (upstream's
accelerators/tpu.go)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from lws_operator.logic.mutation.tpu import (
    add_tpu_env,
    container_requests_tpus,
    pod_requests_tpus,
    quantity_is_zero,
    tpu_containers,
)
from tests.harness.pod_bodies import hosts

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
SUBGROUP_INDEX = "leaderworkerset.sigs.k8s.io/subgroup-index"
SUBGROUP_SIZE = "leaderworkerset.sigs.k8s.io/subgroup-size"
LEADER_TPUS = "leaderworkerset.sigs.k8s.io/leader-requests-tpus"
TPU_NAMES = (
    "TPU_WORKER_HOSTNAMES",
    "TPU_WORKER_ID",
    "TPU_NAME",
    "TPU_PROCESS_ADDRESSES",
    "TPU_PROCESS_PORT",
)


def tpu_container(name: str = "tpu", *env: tuple[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "resources": {"limits": {"google.com/tpu": "4"}}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env]
    return container


def plain_container(name: str = "sidecar") -> dict[str, Any]:
    return {"name": name, "resources": {"limits": {"cpu": "1"}}}


def make_pod(
    name: str,
    worker_index: str | None,
    *,
    leader_tpus: bool = False,
    subgroup_size: str | None = None,
    subgroup_index: str | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    subdomain: str = "default",
) -> dict[str, Any]:
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if worker_index is not None:
        labels[WORKER_INDEX] = worker_index
    if subgroup_index is not None:
        labels[SUBGROUP_INDEX] = subgroup_index
    if leader_tpus:
        annotations[LEADER_TPUS] = "true"
    if subgroup_size is not None:
        annotations[SUBGROUP_SIZE] = subgroup_size
    spec: dict[str, Any] = {
        "subdomain": subdomain,
        "containers": containers if containers is not None else [tpu_container()],
    }
    if init_containers is not None:
        spec["initContainers"] = init_containers
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def addresses(*pairs: tuple[str, int], sub: str = "default") -> str:
    return ",".join(f"{n}.{sub}:{p}" for n, p in pairs)


def workers(leader: str, first: int, last: int) -> list[str]:
    return [f"{leader}-{k}" for k in range(first, last + 1)]


def tpu_env(container: dict[str, Any]) -> list[tuple[str, str]]:
    """The TPU entries of a container, in order, as (name, value)."""
    return [(e["name"], e["value"]) for e in container.get("env", []) if e["name"] in TPU_NAMES]


def expected_env(
    host_list: list[str], worker_id: int, name: str, port: int = 8476, *, with_port: bool = True
) -> list[tuple[str, str]]:
    env = [
        ("TPU_WORKER_HOSTNAMES", hosts(*host_list)),
        ("TPU_WORKER_ID", str(worker_id)),
        ("TPU_NAME", name),
        ("TPU_PROCESS_ADDRESSES", addresses(*((h, port) for h in host_list))),
    ]
    if with_port:
        env.append(("TPU_PROCESS_PORT", str(port)))
    return env


# --- detection ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quantity", "zero"),
    [
        (0, True),
        (0.0, True),
        (4, False),
        (0.5, False),
        ("0", True),
        ("+0", True),
        ("0.0", True),
        ("0m", True),
        ("0Ki", True),
        ("0e3", True),
        (".0", True),
        ("4", False),
        ("500m", False),
        ("1Ki", False),
        ("1e3", False),
        ("-1", False),
        ("1.", False),
    ],
)
def test_quantity_is_zero(quantity: Any, zero: bool) -> None:
    assert quantity_is_zero(quantity) is zero


@pytest.mark.parametrize("quantity", ["", "abc", "4 ", " 4", "4x", "1KiB", True, None, [], {}])
def test_quantity_rejects_non_quantities(quantity: Any) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        quantity_is_zero(quantity)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"limits": {"google.com/tpu": "4"}}, True),
        ({"limits": {"google.com/tpu": 4}}, True),
        ({"requests": {"google.com/tpu": "4"}}, True),
        ({"limits": {"google.com/tpu": "0"}, "requests": {"google.com/tpu": "4"}}, True),
        ({"limits": {"google.com/tpu": "0"}}, False),
        ({"limits": {"cpu": "4", "nvidia.com/gpu": "8"}}, False),
        ({"limits": None, "requests": None}, False),
        (None, False),
    ],
)
def test_container_requests_tpus(resources: Any, expected: bool) -> None:
    assert container_requests_tpus({"name": "c", "resources": resources}) is expected


def test_invalid_tpu_quantity_names_the_container() -> None:
    container = {"name": "c", "resources": {"limits": {"google.com/tpu": "lots"}}}
    with pytest.raises(
        ValueError, match=r"google\.com/tpu quantity in resources\.limits of container c"
    ):
        container_requests_tpus(container)


def test_tpu_containers_lists_regular_then_init_containers_in_order() -> None:
    pod = make_pod(
        "p-0",
        "0",
        containers=[plain_container("a"), tpu_container("b"), tpu_container("c")],
        init_containers=[tpu_container("i1"), plain_container("i2")],
    )
    assert [c["name"] for c in tpu_containers(pod)] == ["b", "c", "i1"]
    assert pod_requests_tpus(pod)


@pytest.mark.parametrize(
    ("containers", "init_containers", "expected"),
    [
        ([plain_container()], None, False),
        ([plain_container()], [tpu_container()], True),
        ([], [], False),
        (None, None, False),
    ],
)
def test_pod_requests_tpus(
    containers: list[dict[str, Any]] | None,
    init_containers: list[dict[str, Any]] | None,
    expected: bool,
) -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": containers}}
    if init_containers is not None:
        pod["spec"]["initContainers"] = init_containers
    assert pod_requests_tpus(pod) is expected


# --- (a) whole group ------------------------------------------------------------------------

L = "test-sample-1"


@pytest.mark.parametrize(
    ("pod", "size", "expected"),
    [
        pytest.param(
            make_pod(L, "0"),
            5,
            expected_env([L, *workers(L, 1, 4)], 0, L),
            id="leader size 5",
        ),
        pytest.param(
            make_pod(f"{L}-3", "3"),
            5,
            expected_env(workers(L, 1, 4), 2, L),
            id="worker 3 size 5, leader without TPUs: id is index-1",
        ),
        pytest.param(
            make_pod(f"{L}-3", "3", leader_tpus=True),
            5,
            expected_env([L, *workers(L, 1, 4)], 3, L),
            id="worker 3 size 5, leader with TPUs: id is the index",
        ),
        pytest.param(
            make_pod(f"{L}-1", "1", leader_tpus=True),
            2,
            expected_env([L, f"{L}-1"], 1, L),
            id="worker size 2",
        ),
        pytest.param(make_pod(L, "0"), 1, expected_env([L], 0, L), id="leader size 1"),
        pytest.param(
            make_pod(L, "0", subdomain=L),
            3,
            [
                ("TPU_WORKER_HOSTNAMES", hosts(L, f"{L}-1", f"{L}-2", sub=L)),
                ("TPU_WORKER_ID", "0"),
                ("TPU_NAME", L),
                (
                    "TPU_PROCESS_ADDRESSES",
                    addresses((L, 8476), (f"{L}-1", 8476), (f"{L}-2", 8476), sub=L),
                ),
                ("TPU_PROCESS_PORT", "8476"),
            ],
            id="UniquePerReplica subdomain",
        ),
        pytest.param(
            make_pod(L, "0", containers=[tpu_container("t", ("TPU_PROCESS_PORT", "9000"))]),
            2,
            [
                ("TPU_PROCESS_PORT", "9000"),
                ("TPU_WORKER_HOSTNAMES", hosts(L, f"{L}-1")),
                ("TPU_WORKER_ID", "0"),
                ("TPU_NAME", L),
                ("TPU_PROCESS_ADDRESSES", addresses((L, 9000), (f"{L}-1", 9000))),
            ],
            id="user port kept and not repeated",
        ),
    ],
)
def test_group_env(pod: dict[str, Any], size: int, expected: list[tuple[str, str]]) -> None:
    add_tpu_env(pod, size)
    assert tpu_env(pod["spec"]["containers"][0]) == expected


TWO_CONTAINER_HOSTS = hosts(L, L, f"{L}-1", f"{L}-1")
TWO_CONTAINER_ADDRESSES = addresses((L, 8476), (L, 8477), (f"{L}-1", 8476), (f"{L}-1", 8477))


@pytest.mark.parametrize(
    ("name", "worker_index", "ids"),
    [(L, "0", ("0", "1")), (f"{L}-1", "1", ("2", "3"))],
)
def test_group_env_with_two_tpu_containers(
    name: str, worker_index: str, ids: tuple[str, str]
) -> None:
    pod = make_pod(
        name,
        worker_index,
        leader_tpus=True,
        containers=[tpu_container("c1"), tpu_container("c2")],
    )
    add_tpu_env(pod, 2)
    for container, worker_id, port in zip(
        pod["spec"]["containers"], ids, ("8476", "8477"), strict=True
    ):
        assert tpu_env(container) == [
            ("TPU_WORKER_HOSTNAMES", TWO_CONTAINER_HOSTS),
            ("TPU_WORKER_ID", worker_id),
            ("TPU_NAME", L),
            ("TPU_PROCESS_ADDRESSES", TWO_CONTAINER_ADDRESSES),
            ("TPU_PROCESS_PORT", port),
        ]


def test_group_env_with_custom_ports_per_container() -> None:
    pod = make_pod(
        L,
        "0",
        containers=[
            tpu_container("c1", ("TPU_PROCESS_PORT", "8478")),
            tpu_container("c2", ("TPU_PROCESS_PORT", "8479")),
        ],
    )
    add_tpu_env(pod, 2)
    expected_addresses = addresses((L, 8478), (L, 8479), (f"{L}-1", 8478), (f"{L}-1", 8479))
    for container, port in zip(pod["spec"]["containers"], ("8478", "8479"), strict=True):
        env = tpu_env(container)
        assert ("TPU_PROCESS_ADDRESSES", expected_addresses) in env
        assert [v for k, v in env if k == "TPU_PROCESS_PORT"] == [port]


def test_only_tpu_containers_get_variables_and_init_containers_count() -> None:
    pod = make_pod(
        L,
        "0",
        containers=[plain_container("a"), tpu_container("b")],
        init_containers=[tpu_container("i")],
    )
    add_tpu_env(pod, 1)
    assert "env" not in pod["spec"]["containers"][0]
    assert tpu_env(pod["spec"]["containers"][1]) == [
        ("TPU_WORKER_HOSTNAMES", hosts(L, L)),
        ("TPU_WORKER_ID", "0"),
        ("TPU_NAME", L),
        ("TPU_PROCESS_ADDRESSES", addresses((L, 8476), (L, 8477))),
        ("TPU_PROCESS_PORT", "8476"),
    ]
    assert ("TPU_WORKER_ID", "1") in tpu_env(pod["spec"]["initContainers"][0])
    assert ("TPU_PROCESS_PORT", "8477") in tpu_env(pod["spec"]["initContainers"][0])


def test_variables_are_appended_after_user_variables() -> None:
    pod = make_pod(L, "0", containers=[tpu_container("t", ("A", "1"))])
    add_tpu_env(pod, 1)
    assert [e["name"] for e in pod["spec"]["containers"][0]["env"]] == ["A", *TPU_NAMES]


@pytest.mark.parametrize("present", ["TPU_WORKER_HOSTNAMES", "TPU_WORKER_ID"])
@pytest.mark.parametrize("subgroup_size", [None, "2"])
def test_nothing_happens_when_first_tpu_container_already_has_variables(
    present: str, subgroup_size: str | None
) -> None:
    pod = make_pod(
        L,
        "0",
        subgroup_size=subgroup_size,
        subgroup_index="0",
        containers=[tpu_container("t", (present, "x")), tpu_container("u")],
    )
    before = copy.deepcopy(pod)
    add_tpu_env(pod, 4)
    assert pod == before


def test_nothing_happens_without_tpu_containers() -> None:
    pod = make_pod(L, "0", containers=[plain_container()])
    before = copy.deepcopy(pod)
    add_tpu_env(pod, 4)
    assert pod == before


@pytest.mark.parametrize("name", ["-3", "noordinal"])
def test_worker_without_parent_name_is_rejected(name: str) -> None:
    with pytest.raises(ValueError, match=f"^parsing parent name from pod {name}$"):
        add_tpu_env(make_pod(name, "3"), 4)


def test_oversized_group_is_rejected_instead_of_exhausting_memory() -> None:
    with pytest.raises(ValueError, match="exceeds 65536"):
        add_tpu_env(make_pod(L, "0"), 10**9)


# --- (b) per subgroup -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            make_pod(f"{L}-7", "7", subgroup_size="5", subgroup_index="1"),
            expected_env(workers(L, 6, 10), 1, L),
            id="size 11 sgs 5 worker 7, leader without TPUs",
        ),
        pytest.param(
            make_pod(f"{L}-3", "3", leader_tpus=True, subgroup_size="5", subgroup_index="0"),
            expected_env([L, *workers(L, 1, 4)], 3, L),
            id="size 10 sgs 5 worker 3, leader with TPUs",
        ),
        pytest.param(
            make_pod(L, "0", subgroup_size="5", subgroup_index="0"),
            expected_env([L, *workers(L, 1, 4)], 0, L),
            id="leader size 5 sgs 5",
        ),
        pytest.param(
            make_pod(f"{L}-7", "7", leader_tpus=True, subgroup_size="4", subgroup_index="1"),
            expected_env(workers(L, 4, 7), 3, L),
            id="leader with TPUs, later subgroup shifts left",
        ),
        pytest.param(
            make_pod(f"{L}-5", "5", subgroup_size="4", subgroup_index="1"),
            expected_env(workers(L, 5, 8), 0, L),
            id="leader without TPUs, subgroup 1",
        ),
        pytest.param(
            make_pod("test-sample-0-2", "2", subgroup_size="2", subgroup_index="0"),
            expected_env(workers("test-sample-0", 1, 2), 1, "test-sample-0"),
            id="LeaderExcluded worker",
        ),
        pytest.param(
            # The label says subgroup 1 (size 10: workers 5..9), but without a TPU leader the TPU
            # subgroups are recomputed from the workers alone: worker 5 is the last of 1..5.
            make_pod(f"{L}-5", "5", subgroup_size="5", subgroup_index="1"),
            expected_env(workers(L, 1, 5), 4, L),
            id="leader without TPUs recomputes the subgroup from the worker index",
        ),
        pytest.param(
            make_pod(
                f"{L}-5",
                "5",
                subgroup_size="4",
                subgroup_index="1",
                containers=[tpu_container("t", ("TPU_PROCESS_PORT", "8478"))],
            ),
            [
                ("TPU_PROCESS_PORT", "8478"),
                *expected_env(workers(L, 5, 8), 0, L, 8478, with_port=False),
            ],
            id="user port",
        ),
    ],
)
def test_subgroup_env(pod: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    add_tpu_env(pod, 999)  # the group size plays no part per subgroup
    assert tpu_env(pod["spec"]["containers"][0]) == expected


def test_subgroup_env_goes_to_the_first_tpu_container_only() -> None:
    pod = make_pod(
        L,
        "0",
        subgroup_size="2",
        subgroup_index="0",
        containers=[plain_container("a"), tpu_container("b"), tpu_container("c")],
    )
    add_tpu_env(pod, 4)
    assert tpu_env(pod["spec"]["containers"][1]) == expected_env([L, f"{L}-1"], 0, L)
    assert "env" not in pod["spec"]["containers"][0]
    assert "env" not in pod["spec"]["containers"][2]


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        pytest.param(
            make_pod(L, "0", subgroup_size="4"),
            "parsing label leaderworkerset.sigs.k8s.io/subgroup-index for pod test-sample-1: "
            "label not found",
            id="LeaderExcluded leader with TPUs (upstream quirk)",
        ),
        pytest.param(
            make_pod(L, "0", subgroup_size="x", subgroup_index="0"),
            'parsing annotation leaderworkerset.sigs.k8s.io/subgroup-size="x" for pod '
            "test-sample-1: invalid syntax",
            id="bad subgroup size",
        ),
        pytest.param(
            make_pod(f"{L}-1", None, subgroup_size="4", subgroup_index="0"),
            "parsing label leaderworkerset.sigs.k8s.io/worker-index for pod test-sample-1-1: "
            "label not found",
            id="no worker index",
        ),
        pytest.param(
            make_pod(L, "0", subgroup_size="0", subgroup_index="0"),
            "annotation leaderworkerset.sigs.k8s.io/subgroup-size must not be 0 for pod "
            "test-sample-1",
            id="zero subgroup size",
        ),
        pytest.param(
            make_pod("-1", "1", subgroup_size="4", subgroup_index="0"),
            "parsing parent name from pod -1",
            id="no parent name",
        ),
        pytest.param(
            make_pod(L, "0", subgroup_size="1000000000", subgroup_index="0"),
            "TPU host list of 1000000000 entries for pod test-sample-1 exceeds 65536: the group "
            "or subgroup size is too large",
            id="oversized subgroup",
        ),
    ],
)
def test_subgroup_env_rejections(pod: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        add_tpu_env(pod, 4)
    assert str(caught.value) == message
