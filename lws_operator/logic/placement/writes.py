"""The gang's write on a pod, as a plan action: our scheduling gate lifted from a leader (Hash
admission, the native scheduler provider)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.logic.objects.meta import meta_of
from lws_operator.logic.placement import gang
from lws_operator.logic.reconcile.plan import GONE_OR_CHANGED_SKIP, Common, Patch, core


def ungate(leader: Mapping[str, Any]) -> Patch:
    """Lift our scheduling gate from a leader (guarded by resourceVersion; gone or changed
    since: the watch event brings the pass that decides again)."""
    meta = meta_of(leader)
    return Patch(core(str(meta.get("namespace")), "pods", "Pod"), str(meta.get("name")),
                 {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                  "spec": {"schedulingGates": gang.gates_without_ours(leader) or None}},
                 common=Common(policy=GONE_OR_CHANGED_SKIP))
