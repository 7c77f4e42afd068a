"""Why a DisaggregatedSet is not Available: the pure half of ``kubectl lws why`` for one.

A DisaggregatedSet is its role LeaderWorkerSets: almost every reason it is not Available is a
reason one of them is not Ready, which the LeaderWorkerSet diagnosis already finds
(``plugin.analysis.diagnosis``). So the report is the set's own causes first, then each
child's findings, marked with its role and name, the target revision's children before the
old ones (a coordinated rollout waits on the new revision's groups: the stability gate).

The set's own causes, in the order they are reported:
  NotObserved      the controller has not processed the latest spec (operator down?)
  RolloutPaused    the rollout is held by ``lws-operator.dev/paused`` (resume it)
  ScalerMissing    an External role has no DisaggregatedSetRoleScaler (the controller creates
                   it): its replicas are unknown, the set cannot be Available
  RoleMissing      a role has no LeaderWorkerSet of the target revision in a slice
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lws_operator.api.constants import PAUSED_ANNOTATION
from lws_operator.api.disaggregated import DisaggregatedSetView
from lws_operator.logic.disaggregated import slices
from lws_operator.plugin.analysis.diagnosis import Diagnosis, Finding
from lws_operator.plugin.analysis.rollout_status import Verdict, observed_generation, paused

NOT_OBSERVED: Final = "NotObserved"
ROLLOUT_PAUSED: Final = "RolloutPaused"
SCALER_MISSING: Final = "ScalerMissing"
ROLE_MISSING: Final = "RoleMissing"

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class ChildDiagnosis:
    """One child LeaderWorkerSet's diagnosis, with where it sits in the set."""

    role: str
    slice: int
    revision: str
    current: bool
    diagnosis: Diagnosis


@dataclass(frozen=True)
class DsDiagnosis:
    name: str
    namespace: str
    role: str | None
    available: bool
    summary: str
    findings: tuple[Finding, ...]

    @property
    def blocked(self) -> bool:
        return any(f.blocking for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "DisaggregatedSet", "name": self.name, "namespace": self.namespace,
                "role": self.role, "available": self.available, "blocked": self.blocked,
                "summary": self.summary, "findings": [f.as_dict() for f in self.findings]}


def set_findings(ds: Obj, children: Sequence[Obj], scalers: Sequence[Obj],
                 revision: str) -> list[Finding]:
    """The set's own causes (module docstring) from its owned children and scalers."""
    view = DisaggregatedSetView.of(ds)
    found: list[Finding] = []
    observed = observed_generation(ds)
    if observed is None or observed < view.generation:
        found.append(Finding(NOT_OBSERVED, "the controller has not processed the latest spec: "
                             "is the operator running?",
                             evidence=(f"metadata.generation {view.generation}, "
                                       f"status.observedGeneration {observed}",),
                             hint="kubectl get pods -n <operator namespace>, and its logs"))
    if paused(ds):
        found.append(Finding(ROLLOUT_PAUSED, "the rollout is paused: every role holds at its "
                             "current step",
                             evidence=(f'annotation {PAUSED_ANNOTATION}="true"',),
                             fix=f"kubectl lws -n {view.namespace} rollout resume {view.name}"))
    bound = {str(((s.get("metadata") or {}).get("labels") or {}).get(
        "disaggregatedset.x-k8s.io/role") or "") for s in scalers}
    for role in view.roles:
        if role.external and role.name not in bound:
            found.append(Finding(SCALER_MISSING, f"role {role.name} is External but has no "
                                 "DisaggregatedSetRoleScaler: its replicas are unknown",
                                 evidence=(f"no scaler {view.name}-{role.name}",),
                                 hint="the controller creates it; see the set's Events"))
    current = [c for c in children if slices.revision_label(c) == revision]
    for k in range(view.slices):
        have = {slices.role_of(c) for c in slices.in_slice_objects(current, k)}
        missing = [r.name for r in view.roles if r.name not in have]
        if missing:
            found.append(Finding(ROLE_MISSING, f"slice {k} has no LeaderWorkerSet of revision "
                                 f"{revision} for role {', '.join(missing)}",
                                 evidence=(f"children of revision {revision} in slice {k}: "
                                           f"{', '.join(sorted(have)) or 'none'}",),
                                 hint="the controller creates them; see the set's Events "
                                      "(kubectl describe disaggregatedset "
                                      f"{view.name})"))
    return found


def _marked(child: ChildDiagnosis, finding: Finding) -> Finding:
    name = child.diagnosis.name
    where = f"role {child.role} (LeaderWorkerSet {name}"
    where += ")" if child.current else f", old revision {child.revision})"
    return dataclasses.replace(finding, summary=f"{where}: {finding.summary}")


def ds_diagnosis(ds: Obj, verdict: Verdict, own: Sequence[Finding],
                 children: Sequence[ChildDiagnosis], role: str | None = None) -> DsDiagnosis:
    """The report: ``own`` (:func:`set_findings`), then each child's findings (only ``role``'s
    when given), the target revision's first; the summary is the rollout's state
    (``rollout_status.ds_verdict``)."""
    view = DisaggregatedSetView.of(ds)
    ordered = sorted((c for c in children if role is None or c.role == role),
                     key=lambda c: (not c.current, c.slice, c.role))
    findings = [*own, *(_marked(c, f) for c in ordered for f in c.diagnosis.findings)]
    blocking = [f for f in findings if f.blocking]
    others = [f for f in findings if not f.blocking]
    summary = "; ".join((verdict.message, *verdict.details))
    return DsDiagnosis(name=view.name, namespace=view.namespace, role=role,
                       available=verdict.state == "complete", summary=summary,
                       findings=(*blocking, *others))
