"""The steps of a DisaggregatedSet pass: pure functions of a snapshot (``DsObserved``) and what
the steps before them decided (the target revision, a slice index), each returning its ``Plan``,
or ``Planned(plan, value)`` where a later step needs what it decided.

``logic.disaggregated.pipeline.reconcile`` runs them in upstream's order and hands each its
arguments; the controller's runner (``controllers.passes``) builds the snapshot before each
step from the watch caches, carries out the plan (``kube.executor``) and stops where a plan says
so.

Every write is decided from the cache and planned only where it changes something, so a pass
over a set at rest plans nothing. Writes are guarded: deletes by UID, scale and annotation
patches carry the child's UID (a namesake created meanwhile is not touched), status patches the
resourceVersion they were computed from. A child is written only when this set controls it
(``api.disaggregated.controlled_by``); a foreign object at a child's name is an error with
upstream's text (upstream's lws_manager.go), never adopted or changed.

Upstream's errors do not end a pass where upstream's do not either: a slice's failure is
collected (``slice <n>: ...``) or decided (``workloads``' value) and the other slices still run,
the status is still written, and the pass then fails with every error joined (the controller
raises it, so the work queue retries with backoff).

Upstream quirks (docs/architecture.md lists them with the others):

* Fixed: a new revision only partly created (a crash between the creates of the rollout's
  start) blocked upstream's rollout forever at the stability gate; here the gate creates the
  missing new-revision LeaderWorkerSets (at 0) and waits for them.
* Fixed: upstream takes the rollout path only while old replicas of roles still in the spec
  remain, so when only removed roles hold old replicas (every role renamed, e.g.
  prefill/decode -> p/d) it took the simple path: the new roles jumped to their targets and
  the old revision was never drained nor deleted. Here every old replica counts, a removed
  role's as much as a spec role's (``workloads``), so a full rename rolls like any add +
  remove.
* Fixed: upstream deletes any Service carrying the set's name label; here only Services this
  set controls are deleted (the controller never mutates an object it does not own), which
  still covers every Service the upstream controller made (they carry its controller
  reference).
* Kept: ``RollingUpdateCompleted`` is recorded only when the planner has no step while old
  replicas remain (almost never: the last step drains old to 0 and the next pass takes the
  simple path); the budget spill-over after a coordinated drain; old-revision Services removed
  once the new revision is ready when a role was added; edits of fields outside the revision
  reach existing children only at the next rollout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from lws_operator.api.constants import (
    EVENT_ACTION_CREATE,
    EVENT_ACTION_DELETE,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
)
from lws_operator.api.disaggregated import (
    API_VERSION,
    PLURAL,
    ROLE_LABEL,
    SCALER_PLURAL,
    RoleView,
)
from lws_operator.logic.disaggregated import children, history, names, scaling, slices
from lws_operator.logic.disaggregated import status as ds_status
from lws_operator.logic.disaggregated.children import live_spec_patch, not_controlled_message
from lws_operator.logic.disaggregated.drain import old_revision, scale_down_old
from lws_operator.logic.disaggregated.revision import target_revision
from lws_operator.logic.disaggregated.rollout_config import role_budgets
from lws_operator.logic.disaggregated.rollout_inputs import rollout_inputs
from lws_operator.logic.disaggregated.scale_up import NewLws, revision_stable, scale_up_new
from lws_operator.logic.disaggregated.services import plan_services
from lws_operator.logic.disaggregated.snapshot import DsObserved
from lws_operator.logic.identity.writes import revision_update
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.reconcile.plan import (
    CREATE_IF_ABSENT,
    EMPTY,
    GONE_OR_CHANGED_SKIP,
    Action,
    Common,
    Create,
    Delete,
    Patch,
    Plan,
    Planned,
    Policy,
    Record,
    Target,
    Then,
    apps,
    core,
    lws_target,
)

Child = Mapping[str, Any]
ROLLOUT_REQUEUE = 1.0  # seconds: upstream's requeue while a rollout waits (start, stability)

# Upstream's event reasons and actions (disaggregatedset_controller.go, executor.go).
REASON_ROLLING_UPDATE_STARTED = "RollingUpdateStarted"
REASON_ROLLING_UPDATE_COMPLETED = "RollingUpdateCompleted"
REASON_SCALING_UP = "ScalingUp"
REASON_SCALING_DOWN = "ScalingDown"
REASON_LWS_DELETED = "LWSDeleted"
REASON_SCALER_CREATED = "ScalerCreated"
REASON_SCALER_DELETED = "ScalerDeleted"
REASON_SCALER_CONFLICT = "ScalerConflict"
ACTION_MIGRATE = "Migrate"
ACTION_CONFLICT = "Conflict"


def ds_target(namespace: str, plural: str, kind: str) -> Target:
    return Target(f"/apis/{API_VERSION}/namespaces/{namespace}/{plural}", kind)


def _normal(reason: str, action: str, note: str) -> Event:
    return Event(reason, EVENT_TYPE_NORMAL, action, note)


def _uid(obj: Mapping[str, Any]) -> str:
    return str(meta_of(obj).get("uid") or "")


def _in_role_order(obs: DsObserved, objects: Sequence[Child]) -> list[Child]:
    """Children by slice, revision, then spec role order (removed roles last, by name), so that
    a pass's writes and Events read in the order the roles are declared."""
    order = {role.name: i for i, role in enumerate(obs.ds.roles)}

    def key(obj: Child) -> tuple[int, str, int, str]:
        role = slices.role_of(obj)
        return (slices.slice_index_of(obj) or 0, slices.revision_label(obj),
                order.get(role, len(order)), role)
    return sorted(objects, key=key)


def _delete(target: Target, obj: Child, events: tuple[Event, ...] = (),
            policy: Policy | None = None) -> Delete:
    """Delete a child by name with its UID as precondition; gone or replaced meanwhile is
    nothing to do. The cache forgets it at once (later steps of the pass must not see it)."""
    return Delete(target, name_of(obj), _uid(obj), forget=obj,
                  common=Common(events=events, policy=policy or Policy(
                      not_found=Then.SKIP, conflict=Then.SKIP)))


def scale(obs: DsObserved, k: int, lws: Child, replicas: int,
          events: tuple[Event, ...] = ()) -> Patch:
    """Set a child's ``spec.replicas`` in slice ``k``: a merge patch naming the child's UID, so
    that another object at its name (a namesake created since the cache saw it) is refused
    with a 409, which becomes upstream's "refusing to scale it" error; a child gone meanwhile
    is nothing to do (its watch event brings the next pass)."""
    name = name_of(lws)
    return Patch(lws_target(obs.ds.namespace), name,
                 {"metadata": {"uid": _uid(lws)}, "spec": {"replicas": replicas}},
                 common=Common(events=events, policy=Policy(
                     not_found=Then.SKIP, conflict=Then.COLLECT, collect=True,
                     reason_prefix=f"slice {k}: ",
                     conflict_reason=not_controlled_message(name, obs.ds.name, "scale"))))


# ------------------------------------------------------------------------------ revision


def revision(obs: DsObserved) -> Planned[str]:
    """Decide the target revision once per pass, for every step after it: our hash of the
    roles, or the revision of children the upstream controller made with the same templates
    (adopted by content, so taking a set over starts no rollout). It writes nothing."""
    return Planned(EMPTY, target_revision(obs.ds, obs.owned_lws))


def history_step(obs: DsObserved, rev: str) -> Plan:
    """The set's revision history (``logic.disaggregated.history``), before any child is
    written: the target revision ``rev`` recorded (created, or renumbered and given the set's
    change cause when it became current again), marked fully Ready once the rollout to it is
    done and every role Ready, and the revisions beyond the history limit deleted then. Only
    ControllerRevisions are written, and only where they differ: a set made before the history
    existed gets its current revision recorded, nothing else."""
    ns = obs.ds.namespace
    decided = history.decide(obs.ds, obs.owned_revisions, obs.owned_lws, rev, obs.scaler_views,
                             obs.now)
    target = apps(ns, "controllerrevisions", "ControllerRevision")
    actions: list[Action] = []
    if decided.create is not None:
        actions.append(Create(target, decided.create, common=Common(policy=CREATE_IF_ABSENT)))
    if decided.update is not None:
        actions.append(revision_update(ns, *decided.update))
    actions += [Delete(target, name_of(r), _uid(r), forget=r,
                       common=Common(policy=GONE_OR_CHANGED_SKIP)) for r in decided.prune]
    return Plan(tuple(actions))


# ------------------------------------------------------------------------- removed slices


def removed_slices(obs: DsObserved) -> Plan:
    """Lowering ``slices`` deletes the children of the slices at or above it directly (no
    drain), with upstream's ``LWSDeleted`` Event per LeaderWorkerSet. Any failure ends the pass
    (upstream returns before anything else runs)."""
    count = obs.ds.slices
    ns = obs.ds.namespace
    actions: list[Action] = []
    fail = Policy(not_found=Then.SKIP, conflict=Then.SKIP)
    for lws in _in_role_order(obs, obs.owned_lws):
        if slices.in_removed_slice(lws, count):
            note = f"Deleted LWS {name_of(lws)} for removed slice {slices.slice_index_of(lws)}"
            actions.append(_delete(lws_target(ns), lws, (
                _normal(REASON_LWS_DELETED, EVENT_ACTION_DELETE, note),), fail))
    for service in obs.owned_services:
        if slices.in_removed_slice(service, count):
            actions.append(_delete(core(ns, "services", "Service"), service, policy=fail))
    return Plan(tuple(actions))


# -------------------------------------------------------------------------------- scalers


def scalers(obs: DsObserved) -> Plan:
    """The role scalers: delete the owned ones of roles no longer External (or gone), create
    the missing ones seeded with the role's running groups (1 for a fresh role), and warn of a
    foreign scaler at a scaler's name (``ScalerConflict``; that role has no scaler this pass)."""
    ds = obs.ds
    target = ds_target(ds.namespace, SCALER_PLURAL, "DisaggregatedSetRoleScaler")
    decided = scaling.plan_scalers(ds, obs.scalers_named.values())
    actions: list[Action] = []
    for scaler in decided.delete:
        note = f"Deleted scaler {scaler.name} (role {scaler.role} is no longer External)"
        actions.append(_delete(target, scaler.raw, (
            _normal(REASON_SCALER_DELETED, EVENT_ACTION_DELETE, note),)))
    for role in decided.create:
        body = children.build_scaler(ds, role, scaling.scaler_seed(role, obs.owned_lws))
        note = f"Created scaler {name_of(body)} for role {role}"
        actions.append(Create(target, body, common=Common(
            events=(_normal(REASON_SCALER_CREATED, EVENT_ACTION_CREATE, note),),
            policy=Policy(conflict=Then.SKIP))))
    for role in decided.conflicts:
        name = names.scaler_name(ds.name, role)
        actions.append(Record(Event(
            REASON_SCALER_CONFLICT, EVENT_TYPE_WARNING, ACTION_CONFLICT,
            f"Scaler {name} exists but is not controlled by this DisaggregatedSet; "
            "not adopting")))
    return Plan(tuple(actions))


# ------------------------------------------------------------------------ legacy slice 0


def legacy(obs: DsObserved, rev: str) -> Plan:
    """With ``slices > 1``, an owned legacy (pre-slices) slice 0 at the target revision is
    deleted, its Service first, so that the slice loop recreates it in slice-aware form with
    its siblings in the same pass (the legacy Service's selector has no slice and would select
    the siblings' pods)."""
    ds = obs.ds
    actions: list[Action] = []
    for service_name, lws_name in slices.legacy_migrations(ds, rev, obs.owned_lws):
        service = obs.services_named.get(service_name)
        if service is not None and service in obs.owned_services:
            actions.append(_delete(core(ds.namespace, "services", "Service"), service))
        lws = obs.owned_lws_named(lws_name)
        if lws is not None:
            note = f"Deleted legacy slice-0 LWS {lws_name} to recreate it in slice-aware form"
            actions.append(_delete(lws_target(ds.namespace), lws, (
                _normal(REASON_LWS_DELETED, ACTION_MIGRATE, note),)))
    return Plan(tuple(actions))


# ---------------------------------------------------------------------------- one slice


def _slice_policy(k: int) -> Policy:
    """A slice's write that fails is collected as ``slice <k>: <reason>`` and the pass goes on
    with the other slices (upstream joins the slices' errors)."""
    return Policy(not_found=Then.SKIP, conflict=Then.SKIP, collect=True,
                  reason_prefix=f"slice {k}: ")


def _create_lws(obs: DsObserved, k: int, rev: str, role: RoleView, replicas: int) -> Create:
    """Create a child; a 409 means a LeaderWorkerSet our cache does not show holds the name
    (one without the set's label, so another owner's): upstream's refusal, collected."""
    body = children.build_lws(obs.ds, role, k, rev, replicas)
    return Create(lws_target(obs.ds.namespace), body, common=Common(policy=Policy(
        conflict=Then.COLLECT, reason_prefix=f"slice {k}: failed to reconcile {role.name} "
                                             "role: ",
        conflict_reason=not_controlled_message(name_of(body), obs.ds.name, "adopt"),
        collect=True)))


def _foreign_at(obs: DsObserved, name: str) -> bool:
    return name in obs.lws_named and obs.owned_lws_named(name) is None


def workloads(obs: DsObserved, k: int, rev: str) -> Planned[str | None]:
    """Slice ``k``'s LeaderWorkerSets at the target revision ``rev``: drained old revisions
    deleted, then the coordinated rolling update while an old revision still holds replicas of
    any role, else the simple path (create, scale). Its value is the error it decided (a foreign
    object at the name of a child it must create, upstream's text), None when there is none.

    Every old role counts for choosing the path, a role removed from the spec as much as a
    spec role (upstream counts spec roles only, and a set whose roles were all renamed never
    drained its old revision). The no-lone-old-role guarantee holds on that path as on any
    other rollout: removed roles are in the planner's role universe (target 0), its orphan
    prevention keeps any old role from reaching 0 alone, and the drain zeroes a revision's
    roles together. Since drained revisions are deleted just before, an old child left here
    holds replicas, so the rollout path runs exactly while an old revision remains.
    """

    mine = _in_role_order(obs, slices.in_slice_objects(obs.owned_lws, k))
    groups = slices.group_by_revision(mine)
    drained = set(slices.drained_revisions(groups, rev))
    actions: list[Action] = []
    for lws in mine:
        if slices.revision_label(lws) in drained:
            actions.append(_delete(lws_target(obs.ds.namespace), lws, (_normal(
                REASON_LWS_DELETED, EVENT_ACTION_DELETE,
                f"Deleted drained LWS {name_of(lws)}"),), _slice_policy(k)))
    live = [lws for lws in mine if slices.revision_label(lws) not in drained]
    old = [lws for lws in live if slices.revision_label(lws) != rev]
    total_old = sum(slices.lws_replicas(lws) for lws in old)
    if old and total_old > 0:
        planned = _rollout(obs, k, rev, live, old)
    else:
        planned = _simple(obs, k, rev, live)
    return Planned(replace(planned.plan, actions=tuple(actions) + planned.plan.actions),
                   planned.value)


def _simple(obs: DsObserved, k: int, rev: str, live: Sequence[Child]) -> Planned[str | None]:
    """Upstream's simple path: every spec role's child at the target revision exists with the
    replicas the role wants (a legacy slice 0 at the target revision is adopted in place)."""
    ds = obs.ds
    actions: list[Action] = []
    for role in ds.roles:
        existing = slices.find_role_lws(live, ds, k, rev, role.name)
        current = 0
        if existing is not None:
            raw = (existing.get("spec") or {}).get("replicas")
            current = raw if isinstance(raw, int) else 0
        desired = scaling.target_replicas(role, obs.scaler_views, current)
        if existing is None:
            name = names.lws_name(ds.name, k, rev, role.name)
            if _foreign_at(obs, name):
                error = f"slice {k}: failed to reconcile {role.name} role: " \
                        + not_controlled_message(name, ds.name, "adopt")
                return Planned(Plan(tuple(actions)), error)
            actions.append(_create_lws(obs, k, rev, role, desired))
        else:
            if slices.lws_replicas(existing) != desired:
                actions.append(scale(obs, k, existing, desired))
            actions += _live_settings(obs, k, role, existing)
    return Planned(Plan(tuple(actions)), None)


def _live_settings(obs: DsObserved, k: int, role: RoleView, lws: Child) -> list[Action]:
    """The documented live settings (``groupReplacementPolicy``) patched onto a running child of
    the target revision (``children.live_spec_patch`` says why)."""
    patch = live_spec_patch(role, lws)
    if patch is None:
        return []
    return [Patch(lws_target(obs.ds.namespace), name_of(lws),
                  {"metadata": {"uid": _uid(lws)}, **patch},
                  common=Common(policy=_slice_policy(k)))]


def _rollout(obs: DsObserved, k: int, rev: str, live: Sequence[Child],
             old: Sequence[Child]) -> Planned[str | None]:
    """Upstream's rollout path: start (the new revision's children at 0, the old ones'
    baselines recorded), then, once every new child is ready at its replicas, one planner step
    per pass: scale the new children up, drain the old ones newest revision first.

    A paused set (``lws-operator.dev/paused: "true"``, ours, as for a LeaderWorkerSet:
    ``logic.rollout.pause``) holds every role at its current step: no start (a set paused
    before its templates change creates no child of the new revision), no planner step. The
    children keep their replicas; a replicas change of a role reaches the rollout's target
    once resumed (the planner scales the new revision to it), not the old revision's
    children meanwhile, whose baselines the planner paces the drain by."""
    ds = obs.ds
    if ds.paused:
        return Planned(EMPTY, None)
    new = {slices.role_of(lws): lws for lws in live if slices.revision_label(lws) == rev}
    ns = ds.namespace
    if not new:
        start: list[Action] = [Record(_normal(
            REASON_ROLLING_UPDATE_STARTED, EVENT_ACTION_UPDATE,
            f"Started rolling update to revision {rev}"))]
        for lws in old:
            patch = slices.initial_replicas_patch(lws)
            if patch is not None:
                body = {**patch, "metadata": {**patch["metadata"], "uid": _uid(lws)}}
                start.append(Patch(lws_target(ns), name_of(lws), body, common=Common(
                    policy=Policy(not_found=Then.SKIP, conflict=Then.SKIP, collect=True,
                                  reason_prefix=f"slice {k}: "))))
        return _create_missing(obs, k, rev, new, start)

    # The stability gate (``scale_up.revision_stable``), with upstream's quirk fixed: a role
    # whose new child is missing (a crash between the start's creates) gets it created here
    # instead of waiting forever.
    spec_roles = [role.name for role in ds.roles]
    settled = {role: NewLws(name_of(lws), role, slices.lws_replicas(lws),
                            slices.status_count(lws, "readyReplicas"))
               for role, lws in new.items()}
    if not revision_stable(settled, spec_roles):
        return _create_missing(obs, k, rev, new, [])

    revisions = [old_revision(r, members.values(), ROLE_LABEL, slices.lws_replicas,
                              slices.initial_replicas)
                 for r, members in slices.group_by_revision(old).items()]
    scalers = obs.scaler_views
    inputs = rollout_inputs(
        spec_roles, revisions, {role: n.replicas for role, n in settled.items()},
        {role.name: scaling.target_replicas(role, scalers, settled[role.name].replicas)
         for role in ds.roles},
        {role.name for role in ds.roles if role.external})
    step = inputs.next_step(role_budgets(ds, inputs.roles, {
        role.name: scaling.target_replicas(role, scalers, 0) for role in ds.roles}))
    if step is None:
        return Planned(Plan((Record(_normal(
            REASON_ROLLING_UPDATE_COMPLETED, EVENT_ACTION_UPDATE,
            f"Completed rolling update to revision {rev}")),)), None)
    # Old revisions are drained before the new one scales up. Upstream scales up first, so in
    # a step that changes both sides (the planner's force drain) a role stands one batch above
    # maxSurge between the two calls: pods the cluster may have no accelerators for. Draining
    # first keeps every instant within the surge bound, and costs no availability: the step's
    # new pods are not Ready for a while after their scale-up anyway, so the Ready capacity
    # after the step is the same whichever call comes first.
    by_name = {name_of(lws): lws for lws in old}
    actions: list[Action] = [
        scale(obs, k, by_name[down.name], down.to, (
            _normal(REASON_SCALING_DOWN, EVENT_ACTION_UPDATE, down.message),))
        for down in scale_down_old(revisions, inputs.roles, inputs.budget(step))]
    for up in scale_up_new(inputs.roles, spec_roles, inputs.current_new, step.new,
                           {role: n.name for role, n in settled.items()}):
        actions.append(scale(obs, k, new[up.role], up.to, (
            _normal(REASON_SCALING_UP, EVENT_ACTION_UPDATE, up.message),)))
    return Planned(Plan(tuple(actions)), None)


def _create_missing(obs: DsObserved, k: int, rev: str, new: Mapping[str, Child],
                    actions: list[Action]) -> Planned[str | None]:
    """Create the new revision's child of every spec role that has none, at 0 replicas, and
    look again in a second (upstream's requeue while a rollout waits)."""
    ds = obs.ds
    for role in ds.roles:
        if role.name in new:
            continue
        name = names.lws_name(ds.name, k, rev, role.name)
        if _foreign_at(obs, name):
            error = f"slice {k}: failed to reconcile {role.name} role: " \
                    + not_controlled_message(name, ds.name, "adopt")
            return Planned(Plan(tuple(actions)), error)
        if name not in obs.lws_named:
            actions.append(_create_lws(obs, k, rev, role, 0))
    return Planned(Plan(tuple(actions), requeue_after=ROLLOUT_REQUEUE), None)


def services(obs: DsObserved, k: int, rev: str) -> Plan:
    """Slice ``k``'s Services (``logic.disaggregated.services``): once the target revision
    ``rev`` is ready on every spec role, one headless, portless Service per role; the Services
    of revisions no longer ready on every spec role are deleted, but only those this set
    controls (upstream's quirk fixed: it deleted any Service carrying the set's name label).

    Upstream's per-slice reconcile returns before the Services when its workloads fail. The
    pass does not run this step after the workloads step decided an error; a write of that
    step that failed is known only once it ran, as the failure reasons the runner puts in this
    step's snapshot (``collected``), and then this step plans nothing."""
    if obs.collected:
        return EMPTY
    ns = obs.ds.namespace
    decided = plan_services(obs.ds, k, obs.owned_lws, obs.owned_services, rev)
    actions: list[Action] = [
        Create(core(ns, "services", "Service"), body, common=Common(policy=_slice_policy(k)))
        for body in decided.create if name_of(body) not in obs.services_named]
    owned = {name_of(s): s for s in obs.owned_services}
    actions += [_delete(core(ns, "services", "Service"), owned[name],
                        policy=_slice_policy(k)) for name in decided.delete if name in owned]
    return Plan(tuple(actions))


# ------------------------------------------------------------------------------- status


def scaler_status(obs: DsObserved) -> Plan:
    """Each bound scaler's status: observed groups over every slice and revision, the leaders
    selector, the generation seen, ``Ready=True/Bound``; patched only where it differs."""
    ds = obs.ds
    target = ds_target(ds.namespace, SCALER_PLURAL, "DisaggregatedSetRoleScaler")
    actions: list[Action] = []
    for role, scaler in obs.scaler_views.items():
        body = scaling.scaler_status(ds, role, scaler,
                                     scaling.observed_groups(role, obs.owned_lws), obs.now)
        if body is not None:
            actions.append(Patch(target, scaler.name,
                                 {"metadata": {"uid": _uid(scaler.raw)}, "status": body},
                                 subresource="status", common=Common(policy=Policy(
                                     not_found=Then.SKIP, conflict=Then.SKIP, collect=True))))
    return Plan(tuple(actions))


def status(obs: DsObserved, rev: str) -> Plan:
    """The set's status (role counts over every slice and revision, Available/Progressing, the
    target revision ``rev``), written only when it changed, guarded by the resourceVersion it
    was computed from. A conflict ends the pass (``Then.STOP``), to be decided again on the
    newer set."""
    ds = obs.ds
    decided = ds_status.compute_status(ds, obs.owned_lws, rev, obs.scaler_views, obs.now)
    if not decided.changed:
        return EMPTY
    return Plan((Patch(ds_target(ds.namespace, PLURAL, "DisaggregatedSet"), ds.name,
                       {"metadata": {"resourceVersion": meta_of(ds.raw).get("resourceVersion")},
                        "status": decided.status},
                       subresource="status", common=Common(policy=Policy(
                           conflict=Then.STOP))),))

