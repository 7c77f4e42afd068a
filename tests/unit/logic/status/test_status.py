"""Status counters, conditions and their Events (upstream's updateStatus; entries
5, 13, 15, 16, 23-27, 49-51 of the table in upstream's
test/integration/controllers/leaderworkerset_test.go).

Each test builds the observed LWS, leader pods and worker StatefulSets as plain dicts and asserts
the exact desired status, Events and "update done" flag.
"""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.logic.objects.events import Event
from lws_operator.logic.status.set_status import (
    GroupCounts,
    StatusError,
    compute_status,
    count_groups,
    hpa_pod_selector,
    merge_conditions,
    select_conditions,
)

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:01:00Z"
T2 = "2026-01-01T00:02:00Z"
SELECTOR = "leaderworkerset.sigs.k8s.io/name=test-sample,leaderworkerset.sigs.k8s.io/worker-index=0"


def _lws(
    replicas: int = 2,
    size: int = 2,
    generation: int = 1,
    partition: int = 0,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "test-sample", "namespace": "ns", "generation": generation},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {"size": size},
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {
                    "partition": partition,
                    "maxUnavailable": 1,
                    "maxSurge": 0,
                },
            },
        },
    }
    if status is not None:
        obj["status"] = status
    return obj


def _leader(index: int | str, key: str = "new", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"test-sample-{index}",
            "labels": {
                NAME_LABEL: "test-sample",
                WORKER_INDEX_LABEL: "0",
                GROUP_INDEX_LABEL: str(index),
                TEMPLATE_REVISION_HASH_LABEL: key,
            },
        },
        "status": {
            "phase": "Running" if ready else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _worker(index: int, key: str = "new", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"test-sample-{index}",
            "labels": {
                NAME_LABEL: "test-sample",
                GROUP_INDEX_LABEL: str(index),
                TEMPLATE_REVISION_HASH_LABEL: key,
            },
        },
        "spec": {"replicas": 1},
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1 if ready else 0},
    }


def _groups(code: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Leader pods and worker sts per ordinal: R ready+updated, o ready old, u updated unready,
    - old unready, . no pods at all, w leader without its worker sts."""
    pods, workers = [], []
    for i, c in enumerate(code):
        if c == ".":
            continue
        key = "new" if c in "Ruw" else "old"
        ready = c in "Ro"
        pods.append(_leader(i, key, ready))
        if c != "w":
            workers.append(_worker(i, key, ready))
    return pods, workers


def _sts(replicas: int) -> dict[str, Any]:
    return {"metadata": {"name": "test-sample"}, "status": {"replicas": replicas}}


def _cond(ctype: str, status: str = "True", time: str = T0, generation: int = 1) -> dict[str, Any]:
    text = {
        "Available": ("AllGroupsReady", "All replicas are ready"),
        "Progressing": ("GroupsProgressing", "Replicas are progressing"),
        "UpdateInProgress": ("GroupsUpdating", "Rolling Upgrade is in progress"),
    }[ctype]
    return {
        "type": ctype,
        "status": status,
        "reason": text[0],
        "message": text[1],
        "lastTransitionTime": time,
        "observedGeneration": generation,
    }


def _status(
    conditions: list[dict[str, Any]],
    ready: int,
    updated: int,
    replicas: int,
    generation: int = 1,
) -> dict[str, Any]:
    return {
        "replicas": replicas,
        "readyReplicas": ready,
        "updatedReplicas": updated,
        "hpaPodSelector": SELECTOR,
        "observedGeneration": generation,
        "conditions": conditions,
    }


def _run(lws: dict[str, Any], code: str, sts_replicas: int | None = None, now: str = T1) -> Any:
    pods, workers = _groups(code)
    replicas = sts_replicas if sts_replicas is not None else len(code)
    return compute_status(lws, "new", _sts(replicas), pods, workers, now)


def _event(reason: str, message: str, ready: int, total: int) -> Event:
    return Event(
        reason, "Normal", "Update", f"{message}, with {ready} groups ready of total {total} groups"
    )


PROGRESSING = ("GroupsProgressing", "Replicas are progressing")
AVAILABLE = ("AllGroupsReady", "All replicas are ready")
UPDATING = ("GroupsUpdating", "Rolling Upgrade is in progress")


def test_hpa_pod_selector_selects_leaders_only() -> None:
    assert hpa_pod_selector("test-sample") == SELECTOR


def test_fresh_lws_gets_progressing_only_with_event() -> None:
    decision = compute_status(_lws(), "new", {"metadata": {}}, [], [], T0)
    assert decision.status == _status([_cond("Progressing")], 0, 0, 0)
    assert decision.events == (_event(*PROGRESSING, 0, 2),)
    assert decision.changed is True
    assert decision.update_done is False


def test_initial_creation_never_sets_update_in_progress() -> None:
    # Entry 24: R 4, new groups are created already updated, none ready yet.
    decision = _run(_lws(replicas=4), "uuuu", sts_replicas=6)
    assert decision.status == _status([_cond("Progressing", time=T1)], 0, 4, 6)
    assert decision.events == (_event(*PROGRESSING, 0, 4),)


def test_progressing_to_available_to_progressing() -> None:
    # Entry 16.
    first = _run(_lws(), "uu", now=T0)
    assert first.status["conditions"] == [_cond("Progressing", time=T0)]
    assert first.events == (_event(*PROGRESSING, 0, 2),)

    ready = _run(_lws(status=first.status), "RR", now=T1)
    assert ready.status == _status(
        [_cond("Progressing", "False", time=T1), _cond("Available", time=T1)], 2, 2, 2
    )
    assert ready.events == (_event(*AVAILABLE, 2, 2),)
    assert ready.update_done is True

    scaled = _run(_lws(replicas=3, generation=2, status=ready.status), "RR", now=T2)
    assert scaled.status == _status(
        [
            _cond("Progressing", time=T2, generation=2),
            _cond("Available", "False", time=T2, generation=2),
        ],
        2,
        2,
        2,
        generation=2,
    )
    assert scaled.events == (_event(*PROGRESSING, 2, 3),)
    assert scaled.update_done is False


def test_rollout_sets_update_in_progress_and_progressing() -> None:
    # Entry 27: after a template change, groups ready on the old revision: (ready 4, updated 0).
    before = _status(
        [_cond("Progressing", "False"), _cond("Available")], ready=4, updated=4, replicas=4
    )
    decision = _run(_lws(replicas=4, generation=2, status=before), "oooo", now=T1)
    assert decision.status == _status(
        [
            _cond("Progressing", time=T1, generation=2),
            _cond("Available", "False", time=T1, generation=2),
            _cond("UpdateInProgress", time=T1, generation=2),
        ],
        4,
        0,
        4,
        generation=2,
    )
    assert decision.events == (_event(*UPDATING, 4, 4),)
    assert decision.update_done is False


def test_update_in_progress_lingers_until_available() -> None:
    rolling = _status(
        [
            _cond("Progressing", generation=2),
            _cond("Available", "False", generation=2),
            _cond("UpdateInProgress", generation=2),
        ],
        ready=3,
        updated=3,
        replicas=4,
        generation=2,
    )
    # Every group updated, one not ready: [Progressing] is chosen, already True: no event, and
    # UpdateInProgress stays True.
    updated = _run(_lws(replicas=4, generation=2, status=rolling), "uRRR", now=T1)
    assert updated.status["conditions"] == rolling["conditions"]
    assert (updated.status["readyReplicas"], updated.status["updatedReplicas"]) == (3, 4)
    assert updated.events == ()
    assert updated.changed is True  # the counters moved
    assert updated.update_done is False

    done = _run(_lws(replicas=4, generation=2, status=updated.status), "RRRR", now=T2)
    assert done.status == _status(
        [
            _cond("Progressing", "False", time=T2, generation=2),
            _cond("Available", time=T2, generation=2),
            _cond("UpdateInProgress", "False", time=T2, generation=2),
        ],
        4,
        4,
        4,
        generation=2,
    )
    assert done.events == (_event(*AVAILABLE, 4, 4),)
    assert done.update_done is True


def test_steady_state_changes_nothing() -> None:
    steady = _status(
        [_cond("Progressing", "False"), _cond("Available")], ready=2, updated=2, replicas=2
    )
    decision = _run(_lws(status=steady), "RR", now=T2)
    assert decision.status == steady
    assert decision.changed is False
    assert decision.events == ()
    assert decision.update_done is True


def test_zero_replicas_is_available() -> None:
    decision = _run(_lws(replicas=0), "")
    assert decision.status == _status([_cond("Available", time=T1)], 0, 0, 0)
    assert decision.events == (_event(*AVAILABLE, 0, 0),)
    assert decision.update_done is True


def test_wiped_conditions_are_re_added() -> None:
    # Entry 25 "Test default progressing state".
    wiped = _status([], ready=1, updated=2, replicas=2)
    decision = _run(_lws(status=wiped), "uR", now=T2)
    assert decision.status == _status([_cond("Progressing", time=T2)], 1, 2, 2)
    assert decision.events == (_event(*PROGRESSING, 1, 2),)


def test_generation_bump_replaces_chosen_and_raises_the_others() -> None:
    steady = _status(
        [_cond("Progressing", "False", time=T0), _cond("Available", time=T0)],
        ready=2,
        updated=2,
        replicas=2,
    )
    decision = _run(_lws(generation=3, status=steady), "RR", now=T2)
    assert decision.status == _status(
        [
            _cond("Progressing", "False", time=T0, generation=3),
            _cond("Available", time=T2, generation=3),
        ],
        2,
        2,
        2,
        generation=3,
    )
    assert decision.events == (_event(*AVAILABLE, 2, 2),)


def test_hpa_selector_is_written_once() -> None:
    custom = {"hpaPodSelector": "custom=1", "conditions": []}
    decision = _run(_lws(status=custom), "RR")
    assert decision.status["hpaPodSelector"] == "custom=1"
    empty = _run(_lws(status={"hpaPodSelector": ""}), "RR")
    assert empty.status["hpaPodSelector"] == SELECTOR


def test_unknown_status_fields_and_condition_types_are_kept() -> None:
    degraded = {"type": "Degraded", "status": "False", "reason": "X", "message": "y",
                "lastTransitionTime": T0, "observedGeneration": 1}  # fmt: skip
    before = {"conditions": [degraded], "futureField": {"a": 1}}
    decision = _run(_lws(generation=2, status=before), "RR", now=T1)
    assert decision.status["futureField"] == {"a": 1}
    assert decision.status["conditions"] == [
        {**degraded, "observedGeneration": 2},
        _cond("Available", time=T1, generation=2),
    ]
    assert before["conditions"] == [degraded]  # the input is not mutated


def test_surge_groups_count_in_replicas_but_not_in_conditions() -> None:
    # Entry 51: R 3, lwsP 2, surge group 3 and group 2 ready on the new revision, groups 0 and 1
    # ready on the old one: Available with (ready 4, updated 2); revisions are kept (lwsP > 0).
    decision = _run(_lws(replicas=3, partition=2), "ooRR")
    assert decision.status["conditions"] == [_cond("Available", time=T1)]
    assert (decision.status["readyReplicas"], decision.status["updatedReplicas"]) == (4, 2)
    assert decision.status["replicas"] == 4
    assert decision.update_done is False
    # lwsP lowered to 0: groups 0 and 1 are now inside the rollout.
    resumed = _run(_lws(replicas=3, generation=2, status=decision.status), "ooRR", now=T2)
    assert [(c["type"], c["status"]) for c in resumed.status["conditions"]] == [
        ("Available", "False"),
        ("UpdateInProgress", "True"),
        ("Progressing", "True"),
    ]
    assert resumed.events == (_event(*UPDATING, 4, 3),)
    finished = _run(_lws(replicas=3, generation=2, status=resumed.status), "RRRR")
    assert (finished.status["readyReplicas"], finished.status["updatedReplicas"]) == (4, 4)
    assert finished.update_done is True


def test_lws_partition_available_with_lower_groups_old() -> None:
    # Entry 50: R 6, lwsP 4, groups 4 and 5 updated and ready: Available with (6, 2).
    decision = _run(_lws(replicas=6, partition=4), "ooooRR")
    assert decision.status["conditions"] == [_cond("Available", time=T1)]
    assert (decision.status["readyReplicas"], decision.status["updatedReplicas"]) == (6, 2)
    assert decision.update_done is False


def test_resize_event_reports_ready_old_groups() -> None:
    # Entry 49: a size change with both groups ready on the old revision.
    before = _status([_cond("Available")], ready=2, updated=2, replicas=2)
    decision = _run(_lws(generation=2, status=before), "oo")
    assert decision.events == (_event(*UPDATING, 2, 2),)


def test_group_index_that_does_not_parse_fails_the_pass() -> None:
    pod = _leader(0)
    pod["metadata"]["labels"][GROUP_INDEX_LABEL] = "zero"
    with pytest.raises(StatusError, match="zero"):
        compute_status(_lws(), "new", _sts(1), [pod], [_worker(0)], T0)
    del pod["metadata"]["labels"][GROUP_INDEX_LABEL]
    with pytest.raises(StatusError):
        compute_status(_lws(), "new", _sts(1), [pod], [_worker(0)], T0)


# --- counting (upstream's updateStatus) ---


@pytest.mark.parametrize(
    ("replicas", "size", "partition", "code", "expected"),
    [
        (2, 2, 0, "RR", GroupCounts(2, 2, 2, 2, 2, 2)),
        (2, 2, 0, "oo", GroupCounts(2, 0, 2, 2, 0, 0)),
        (2, 2, 0, "uu", GroupCounts(0, 2, 0, 2, 2, 0)),
        (2, 2, 0, "--", GroupCounts(0, 0, 0, 2, 0, 0)),
        # A leader without its worker sts is skipped entirely; missing pods count nowhere.
        (3, 2, 0, "Rw.", GroupCounts(1, 1, 1, 1, 1, 1)),
        # Surge ordinals (>= R) count toward ready/updated only.
        (2, 2, 0, "RRRu", GroupCounts(3, 4, 2, 2, 2, 2)),
        # Ordinals below the user's partition count toward readiness only.
        (4, 2, 2, "o-RR", GroupCounts(3, 2, 3, 2, 2, 2)),
        (4, 2, 2, "RR-u", GroupCounts(2, 3, 2, 2, 1, 0)),
    ],
)
def test_count_groups(
    replicas: int, size: int, partition: int, code: str, expected: GroupCounts
) -> None:
    pods, workers = _groups(code)
    got = count_groups("test-sample", replicas, size, partition, "new", pods, workers)
    assert got == expected


def test_count_groups_size_one_needs_no_worker_sts() -> None:
    pods = [_leader(0), _leader(1, key="old"), _leader(2, ready=False)]
    assert count_groups("test-sample", 3, 1, 0, "new", pods, []) == GroupCounts(2, 2, 2, 3, 2, 1)


def test_count_groups_ignores_foreign_pods_and_workers() -> None:
    other = _leader(0)
    other["metadata"]["labels"][NAME_LABEL] = "other"
    worker_pod = _leader(1)
    worker_pod["metadata"]["labels"][WORKER_INDEX_LABEL] = "1"
    got = count_groups("test-sample", 2, 2, 0, "new", [other, worker_pod], [_worker(0)])
    assert got == GroupCounts()


def test_count_groups_matches_worker_sts_by_leader_name() -> None:
    misnamed = _worker(0)
    misnamed["metadata"]["name"] = "test-sample-9"
    assert count_groups("test-sample", 1, 2, 0, "new", [_leader(0)], [misnamed]) == GroupCounts()


@pytest.mark.parametrize(
    ("counts", "replicas", "expected"),
    [
        (GroupCounts(2, 0, 2, 2, 0, 0), 2, ("UpdateInProgress", "Progressing")),
        (GroupCounts(2, 1, 2, 2, 1, 1), 2, ("UpdateInProgress", "Progressing")),
        (GroupCounts(1, 2, 1, 2, 2, 1), 2, ("Progressing",)),
        (GroupCounts(2, 2, 2, 2, 2, 2), 2, ("Available",)),
        (GroupCounts(2, 2, 2, 2, 2, 2), 3, ("Progressing",)),
        (GroupCounts(), 0, ("Available",)),
        (GroupCounts(), 2, ("Progressing",)),
        # Partitioned: lower groups ready on the old revision, upper ones done.
        (GroupCounts(6, 2, 6, 2, 2, 2), 6, ("Available",)),
        (GroupCounts(5, 2, 5, 2, 2, 2), 6, ("Progressing",)),
    ],
)
def test_select_conditions(counts: GroupCounts, replicas: int, expected: tuple[str, ...]) -> None:
    assert select_conditions(counts, replicas) == expected


# --- condition merge rules (upstream's updateStatus) ---


def test_merge_only_flips_true_exclusive_conditions() -> None:
    existing = [_cond("Available", "False", time=T0), _cond("UpdateInProgress", time=T0)]
    merged, changed = merge_conditions(existing, ["Progressing"], 1, T1)
    # Available is already False and Progressing/UpdateInProgress are not exclusive.
    assert merged == [*existing, _cond("Progressing", time=T1)]
    assert changed is True


def test_merge_same_condition_is_no_change() -> None:
    existing = [_cond("Progressing", time=T0)]
    merged, changed = merge_conditions(existing, ["Progressing"], 1, T1)
    assert (merged, changed) == (existing, False)


def test_merge_raising_generation_of_others_is_not_a_change() -> None:
    existing = [_cond("Progressing", time=T0, generation=2), _cond("Available", "False")]
    merged, changed = merge_conditions(existing, ["Progressing"], 2, T1)
    assert merged == [
        _cond("Progressing", time=T0, generation=2),
        _cond("Available", "False", generation=2),
    ]
    assert changed is False


def test_merge_applies_both_chosen_conditions_in_one_pass() -> None:
    merged, changed = merge_conditions(
        [_cond("Available", time=T0)], ["UpdateInProgress", "Progressing"], 2, T1
    )
    assert merged == [
        _cond("Available", "False", time=T1, generation=2),
        _cond("UpdateInProgress", time=T1, generation=2),
        _cond("Progressing", time=T1, generation=2),
    ]
    assert changed is True


def test_merge_fills_missing_reason_and_message_when_flipping() -> None:
    bare = {"type": "Progressing", "status": "True"}
    merged, _ = merge_conditions([bare], ["Available"], 4, T1)
    assert merged == [
        _cond("Progressing", "False", time=T1, generation=4),
        _cond("Available", time=T1, generation=4),
    ]


def test_every_written_condition_has_the_required_fields() -> None:
    required = {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}
    for code in ("", "uu", "oo", "RR", "oR"):
        decision = _run(
            _lws(status={"conditions": [{"type": "Available", "status": "True"}]}), code
        )
        for condition in decision.status["conditions"]:
            assert set(condition) >= required, condition
            assert condition["reason"]
            assert condition["message"]
