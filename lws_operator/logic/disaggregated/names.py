"""Names and system labels of a DisaggregatedSet's children (upstream's lws_manager.go and
scaler_manager.go).

Every child name is built from the DisaggregatedSet's name, the slice index, the revision and the
role, so two sets, slices, revisions or roles never collide and a router can pair same-revision
backends by name alone:

* LeaderWorkerSet ``<ds>-<slice>-<rev>-<role>`` (slice 0 included);
* the pre-slices form ``<ds>-<rev>-<role>``, which upstream's older releases created: it is only
  ever found and adopted as slice 0, never created here;
* the headless Service ``<lws name>-prv``, after the LeaderWorkerSet's actual name, so a legacy
  LeaderWorkerSet's Service keeps the legacy form;
* the role scaler ``<ds>-<role>``.

The admission webhook bounds ``len(ds) + len(role)`` so that the longest of these, the Service
name, stays a DNS-1035 label; :func:`service_name_length` is that arithmetic.
"""

from __future__ import annotations

from typing import Final

from lws_operator.api.disaggregated import (
    NAME_LABEL,
    REVISION_LABEL,
    REVISION_LENGTH,
    ROLE_LABEL,
    SERVICE_SUFFIX,
    SLICE_LABEL,
)

# The label every pod template gets so that Services and tools can tell slices of a role apart;
# its value is ``<ds>-<slice>-<role>`` (it overrides a user ``app`` label, as upstream's does).
APP_LABEL: Final = "app"


def lws_name(ds: str, slice_index: int, rev: str, role: str) -> str:
    """The child LeaderWorkerSet of ``role`` at revision ``rev`` in slice ``slice_index``."""
    return f"{ds}-{slice_index}-{rev}-{role}"


def legacy_lws_name(ds: str, rev: str, role: str) -> str:
    """The pre-slices name of the same LeaderWorkerSet: found and adopted as slice 0, never
    created."""
    return f"{ds}-{rev}-{role}"


def service_name(lws: str) -> str:
    """The headless Service of the LeaderWorkerSet named ``lws``."""
    return f"{lws}{SERVICE_SUFFIX}"


def scaler_name(ds: str, role: str) -> str:
    """The DisaggregatedSetRoleScaler of an External role."""
    return f"{ds}-{role}"


def app_label(ds: str, slice_index: int, role: str) -> str:
    return f"{ds}-{slice_index}-{role}"


def system_labels(ds: str, slice_index: int, rev: str, role: str) -> dict[str, str]:
    """The five labels the controller puts on a child LeaderWorkerSet and its pod templates:
    they win over a user's label of the same key (the LWS docs' Labels table lists the four
    ``disaggregatedset.x-k8s.io`` ones, on LeaderWorkerSet, Service and Pod)."""
    return {
        APP_LABEL: app_label(ds, slice_index, role),
        NAME_LABEL: ds,
        ROLE_LABEL: role,
        SLICE_LABEL: str(slice_index),
        REVISION_LABEL: rev,
    }


def service_name_length(ds: str, role: str, slices: int) -> int:
    """Length of the longest Service name the set can produce: that of its highest slice
    (``<ds>-<slices-1>-<rev>-<role>-prv``)."""
    return len(service_name(lws_name(ds, max(slices, 1) - 1, "x" * REVISION_LENGTH, role)))
