"""Which Services of a slice to create and delete (upstream's TestServiceManager cases as pure
decisions)."""

from __future__ import annotations

from typing import Any

from lws_operator.logic.disaggregated.services import plan_services, ready_on_roles
from lws_operator.logic.disaggregated.slices import group_by_revision
from tests.harness.ds_bodies import child, ds, service

REV = "ef53f2d7"
OLD = "0ld0ld00"


def lws(role: str, rev: str, ready: int, slice_index: int | None = 0) -> dict[str, Any]:
    return child(role, rev, slice_index, replicas=2, ready=ready, ds_name="my-app")


def names(plan_create: tuple[dict[str, Any], ...]) -> list[str]:
    return [s["metadata"]["name"] for s in plan_create]


def svc(rev: str, role: str, slice_index: int | None = 0) -> dict[str, Any]:
    prefix = f"my-app-{rev}" if slice_index is None else f"my-app-{slice_index}-{rev}"
    return service(f"{prefix}-{role}-prv", rev, role, slice_index, ds_name="my-app")


OWNER = ds(name="my-app")


# 173
def test_no_service_until_every_role_is_ready() -> None:
    children = [lws("prefill", REV, 2), lws("decode", REV, 0)]
    plan = plan_services(OWNER, 0, children, [svc(OLD, "prefill")], REV)
    assert plan.create == ()
    assert plan.delete == ()


def test_no_service_without_the_target_revision() -> None:
    plan = plan_services(OWNER, 0, [lws("prefill", OLD, 2), lws("decode", OLD, 2)],
                         [svc(OLD, "prefill")], REV)
    assert plan.create == ()
    assert plan.delete == ()


# 174-179
def test_services_once_both_roles_have_a_ready_group() -> None:
    children = [lws("prefill", REV, 1), lws("decode", REV, 2)]
    plan = plan_services(OWNER, 0, children, [], REV)
    assert names(plan.create) == [f"my-app-0-{REV}-prefill-prv", f"my-app-0-{REV}-decode-prv"]
    for built in plan.create:
        assert built["spec"] == {"clusterIP": "None", "selector": built["metadata"]["labels"]}
        assert built["metadata"]["labels"]["disaggregatedset.x-k8s.io/slice"] == "0"
        assert built["metadata"]["labels"]["disaggregatedset.x-k8s.io/revision"] == REV
    assert plan.delete == ()


def test_existing_services_are_not_created_again() -> None:
    children = [lws("prefill", REV, 1), lws("decode", REV, 2)]
    plan = plan_services(OWNER, 0, children, [svc(REV, "prefill")], REV)
    assert names(plan.create) == [f"my-app-0-{REV}-decode-prv"]


# 180
def test_old_services_deleted_when_the_old_revision_is_drained() -> None:
    children = [lws("prefill", REV, 2), lws("decode", REV, 2),
                lws("prefill", OLD, 0), lws("decode", OLD, 0)]
    existing = [svc(OLD, "prefill"), svc(OLD, "decode"), svc(REV, "prefill"), svc(REV, "decode")]
    plan = plan_services(OWNER, 0, children, existing, REV)
    assert plan.create == ()
    assert plan.delete == (f"my-app-0-{OLD}-prefill-prv", f"my-app-0-{OLD}-decode-prv")


# 181
def test_legacy_service_cleaned_up_once_its_revision_is_gone() -> None:
    children = [lws("prefill", REV, 2), lws("decode", REV, 2)]
    legacy = [svc(OLD, "prefill", None), svc(OLD, "decode", None)]
    plan = plan_services(OWNER, 0, children, legacy, REV)
    assert plan.delete == (f"my-app-{OLD}-prefill-prv", f"my-app-{OLD}-decode-prv")
    # Slice 1 never touches label-less Services.
    slice1 = [lws("prefill", REV, 2, 1), lws("decode", REV, 2, 1)]
    assert plan_services(OWNER, 1, slice1, legacy, REV).delete == ()


# 182
def test_no_flip_flop_while_both_revisions_serve() -> None:
    both = [lws("prefill", REV, 1), lws("decode", REV, 1),
            lws("prefill", OLD, 1), lws("decode", OLD, 1)]
    existing = [svc(OLD, "prefill"), svc(OLD, "decode")]
    plan = plan_services(OWNER, 0, both, existing, REV)
    assert plan.delete == ()
    assert len(plan.create) == 2
    # Old not ready on one role: its Services go.
    half = [*both[:3], lws("decode", OLD, 0)]
    assert plan_services(OWNER, 0, half, existing, REV).delete == (
        f"my-app-0-{OLD}-prefill-prv", f"my-app-0-{OLD}-decode-prv")


def test_a_revision_lacking_an_added_role_loses_its_services() -> None:
    """Upstream quirk kept: the old revision lacks the new role, so it is not ready on every
    current role once the target is."""
    owner = ds(*[{"name": r, "spec": {}} for r in ("prefill", "decode", "encode")],
               name="my-app")
    children = [lws(r, REV, 1) for r in ("prefill", "decode", "encode")] + [
        lws("prefill", OLD, 2), lws("decode", OLD, 2)]
    existing = [svc(OLD, "prefill"), svc(OLD, "decode")]
    assert plan_services(owner, 0, children, existing, REV).delete == (
        f"my-app-0-{OLD}-prefill-prv", f"my-app-0-{OLD}-decode-prv")


def test_other_slices_are_left_alone() -> None:
    children = [lws("prefill", REV, 1), lws("decode", REV, 1)]
    other = [svc(OLD, "prefill", 1)]
    assert plan_services(OWNER, 0, children, other, REV).delete == ()


def test_ready_on_roles() -> None:
    groups = group_by_revision([lws("prefill", REV, 1), lws("decode", REV, 0)])
    assert ready_on_roles(groups[REV], ["prefill"])
    assert not ready_on_roles(groups[REV], ["prefill", "decode"])
    assert not ready_on_roles(groups[REV], ["prefill", "encode"])
