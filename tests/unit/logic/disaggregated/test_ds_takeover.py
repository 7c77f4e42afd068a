"""Taking over a DisaggregatedSet the upstream Go controller made, as the pure pieces see it:
the running revision is kept, every child is found under its name, and nothing is to be
created, scaled, patched or deleted (upstream's upgrade e2e: names, UIDs and revision labels
unchanged)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.disaggregated import DisaggregatedSetView
from lws_operator.logic.disaggregated.children import build_lws, build_service, live_spec_patch
from lws_operator.logic.disaggregated.revision import compute_revision, target_revision
from lws_operator.logic.disaggregated.scaling import plan_scalers, target_replicas
from lws_operator.logic.disaggregated.services import plan_services
from lws_operator.logic.disaggregated.slices import (
    drained_revisions,
    find_role_lws,
    group_by_revision,
    in_slice_objects,
    legacy_migrations,
    lws_replicas,
)
from lws_operator.logic.disaggregated.status import compute_status
from tests.harness.ds_bodies import ds, go_rendering, role

GO_REV = "5c8d0e1f"


def go_made(owner: dict[str, Any], legacy: bool) -> list[dict[str, Any]]:
    """The children the Go controller would have made, as stored, all ready."""
    out = []
    for spec_role in owner["spec"]["roles"]:
        replicas = spec_role["spec"]["replicas"]
        lws = go_rendering(build_lws(owner, spec_role, 0, GO_REV, replicas))
        if legacy:
            labels = lws["metadata"]["labels"]
            del labels["disaggregatedset.x-k8s.io/slice"]
            labels["app"] = f"{owner['metadata']['name']}-{spec_role['name']}"
            lws["metadata"]["name"] = f"{owner['metadata']['name']}-{GO_REV}-{spec_role['name']}"
            worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
            del worker["metadata"]["labels"]["disaggregatedset.x-k8s.io/slice"]
        lws["spec"]["groupIdentity"] = "Ordinal"   # our webhook's default on a later update
        lws["status"] = {"replicas": replicas, "readyReplicas": replicas,
                         "updatedReplicas": replicas}
        out.append(lws)
    return out


@pytest.mark.parametrize("legacy", [True, False])
def test_takeover_changes_nothing(legacy: bool) -> None:
    owner = ds(role("prefill", replicas=2), role("decode", replicas=1), name="sample")
    children = go_made(owner, legacy)
    services = [build_service(owner, lws) for lws in children]
    before = copy.deepcopy((owner, children, services))

    assert compute_revision(owner) != GO_REV
    rev = target_revision(owner, children)
    assert rev == GO_REV
    view = DisaggregatedSetView(owner)
    assert legacy_migrations(owner, rev, children) == []
    assert drained_revisions(group_by_revision(in_slice_objects(children, 0)), rev) == []
    for spec_role, lws in zip(view.roles, children, strict=True):
        found = find_role_lws(children, owner, 0, rev, spec_role.name)
        assert found is lws
        assert lws_replicas(lws) == target_replicas(spec_role, {}, lws_replicas(lws))
        assert live_spec_patch(spec_role, lws) is None
    plan = plan_services(owner, 0, children, services, rev)
    assert plan.create == ()
    assert plan.delete == ()
    assert plan_scalers(owner, []).create == ()
    status = compute_status(owner, children, rev, {}, "2026-12-01T00:00:00Z")
    assert [c["type"] for c in status.status["conditions"]] == ["Available"]
    assert (owner, children, services) == before


def test_a_real_change_after_takeover_rolls_to_our_revision() -> None:
    owner = ds(role("prefill", replicas=2), role("decode", replicas=1), name="sample")
    children = go_made(owner, legacy=True)
    changed = copy.deepcopy(owner)
    changed["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["size"] = 2
    rev = target_revision(changed, children)
    assert rev == compute_revision(changed) != GO_REV
    assert find_role_lws(children, changed, 0, rev, "decode") is None
