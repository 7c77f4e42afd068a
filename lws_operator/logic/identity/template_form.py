"""A normal form of revision content, in which the ways of writing the same templates agree.

The same LeaderWorkerSet templates reach a revision comparison written in more than one way. The
live object keeps what the user wrote (``value: ""``, ``args: []``, ``cpu: 1000m``, a bare
``cpu: 125``), while a revision the upstream Go controller stored is Go's JSON of its typed
structs: it drops a zero value in a non-pointer field with ``omitempty``, adds the zero value of
one without it (``"containerPort": 0``) and of every non-pointer struct (``"resources": {}``,
older releases ``"creationTimestamp": null``), and prints quantities canonically (``"1"``,
``"1Gi"``, ``"125"``). Compared as written, a LeaderWorkerSet taken over from the Go controller
looked like a template change, and every group was recreated for nothing.

Two forms are equal here exactly when Go would decode them into equal typed objects:

* ``null`` is absent, in every field (Go decodes both to the zero value);
* an empty list is absent (Kubernetes API conventions make nil and empty lists equivalent, and
  protobuf storage cannot tell them apart);
* ``{}`` is absent for map fields and non-pointer struct fields (``_EMPTY_MEANS_ABSENT``); in a
  pointer field an empty struct is kept, because its presence can mean something (a volume's
  ``emptyDir: {}``, an affinity term's ``labelSelector: {}``, which selects every pod where no
  selector selects none);
* ``""``, ``false`` and ``0`` are absent in a non-pointer field, where Go cannot tell them from
  absent either; in a pointer field they are kept (``terminationGracePeriodSeconds: 0`` kills at
  once where absent waits 30 s, ``automountServiceAccountToken: false`` is no default,
  ``tolerationSeconds: 0`` evicts at once). The pointer fields are listed below, from the
  ``k8s.io/api`` core/v1 types and the LeaderWorkerSet API; a few names are pointers in one type
  and not in another, and are decided by the field holding them (``_POINTER_SCALARS_UNDER``);
* a quantity is its value, rounded up to the nano unit as Go's ``resource.Quantity`` keeps it
  (``1000m`` is ``1``, ``1024Mi`` is ``1Gi``, ``125`` is ``"125"``);
* map entries are data, not fields: an empty label or node-selector value is kept.

A name missing from the pointer lists makes a zero value there compare equal to absent, so a user
edit between the two would not roll; a name missing from ``_EMPTY_MEANS_ABSENT`` only makes a
takeover compare unequal, which the rolled-out check (``logic.identity.adoption``) still catches.
The lists lean that way on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from lws_operator.logic.objects.quantity import parse_quantity

# Map-typed fields (``map[string]...``): entries are user data and are never dropped.
_MAP_FIELDS: Final = frozenset({
    "labels", "annotations", "nodeSelector", "matchLabels", "options", "volumeAttributes",
    "userAnnotations", "limits", "requests", "overhead", "capacity", "allocatedResources",
    "allocatedResourceStatuses",
})
# Maps of quantities (``ResourceList``): each value is compared as a quantity.
_RESOURCE_LISTS: Final = frozenset({
    "limits", "requests", "overhead", "capacity", "allocatedResources",
})
# ``{}`` here equals absent: the map fields, and the non-pointer struct fields Go always writes.
_EMPTY_MEANS_ABSENT: Final = _MAP_FIELDS | frozenset({
    "metadata", "spec", "status", "resources", "podAffinityTerm", "preference",
})
# Scalar quantity fields; ``divisor`` is not a pointer (Go writes ``"0"`` for absent),
# ``sizeLimit`` is (``0`` is a limit).
_QUANTITY_FIELDS: Final = frozenset({"divisor", "sizeLimit"})
# Pointer scalars of the pod template, claim template and LeaderWorkerSet types, under any name
# of the field holding them: their zero value is not absent.
_POINTER_SCALARS: Final = frozenset({
    "activeDeadlineSeconds", "allowPrivilegeEscalation", "apiGroup",
    "automountServiceAccountToken", "blockOwnerDeletion", "cachingMode", "controller",
    "currentVolumeAttributesClassName", "defaultMode", "deletionGracePeriodSeconds",
    "enableServiceLinks", "expirationSeconds", "fsGroup", "fsGroupChangePolicy",
    "gmsaCredentialSpec", "gmsaCredentialSpecName", "hostProcess", "hostUsers",
    "hostnameOverride", "initiatorName", "localhostProfile", "maxExpirationSeconds", "minDomains",
    "mode", "mountPropagation", "nodeAffinityPolicy", "nodeTaintsPolicy", "optional",
    "podGroupName", "preemptionPolicy", "priority", "privileged", "procMount",
    "readOnlyRootFilesystem", "recursiveReadOnly", "resourceClaimName",
    "resourceClaimTemplateName", "runAsGroup", "runAsNonRoot", "runAsUser", "runAsUserName",
    "runtimeClassName", "seLinuxChangePolicy", "service", "setHostnameAsFQDN",
    "shareProcessNamespace", "sizeLimit", "stopSignal", "storageClassName",
    "supplementalGroupsPolicy", "terminationGracePeriodSeconds", "tolerationSeconds",
    "volumeAttributesClassName", "volumeMode",
    # LeaderWorkerSet API
    "size", "subGroupSize", "subGroupPolicyType", "subdomainPolicy",
})
# Names that are pointers only in some types, by the field that holds that type.
_POINTER_SCALARS_UNDER: Final[Mapping[str, frozenset[str]]] = {
    "csi": frozenset({"readOnly", "fsType"}),
    "azureDisk": frozenset({"readOnly", "fsType", "kind"}),
    "fc": frozenset({"lun"}),
    "clusterTrustBundle": frozenset({"name", "signerName"}),
    "dataSourceRef": frozenset({"namespace"}),
    "hostPath": frozenset({"type"}),
    "options": frozenset({"value"}),  # dnsConfig.options[]: PodDNSConfigOption
    "containers": frozenset({"restartPolicy"}),
    "initContainers": frozenset({"restartPolicy"}),
    "ephemeralContainers": frozenset({"restartPolicy"}),
}



class _Absent:
    """The normal form of a value that stands for an absent field."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


def normal_form(value: Any, key: str = "", holder: str = "") -> Any:
    """``value``, found in field ``key`` of an object held by field ``holder``, in the normal
    form of the module docstring (``ABSENT`` when it stands for an absent field)."""
    if value is None:
        return ABSENT
    if isinstance(value, Mapping):
        if key in _RESOURCE_LISTS:
            return {str(k): _quantity_or_self(v) for k, v in value.items()} or ABSENT
        if key in _MAP_FIELDS:
            return dict(value) or ABSENT
        out = _fields(value, key)
        return ABSENT if not out and key in _EMPTY_MEANS_ABSENT else out
    if isinstance(value, list):
        # Elements are data, not fields: a dict element's fields are held by the list's field.
        return [_fields(v, key) if isinstance(v, Mapping) else v for v in value] or ABSENT
    if key in _QUANTITY_FIELDS:
        value = _quantity_or_self(value)
    if _is_zero(value) and not _pointer(key, holder):
        return ABSENT
    return value


def _fields(value: Mapping[str, Any], holder: str) -> dict[str, Any]:
    out = {}
    for k, v in value.items():
        normal = normal_form(v, str(k), holder)
        if normal is not ABSENT:
            out[str(k)] = normal
    return out


def _pointer(key: str, holder: str) -> bool:
    return key in _POINTER_SCALARS or key in _POINTER_SCALARS_UNDER.get(holder, ())


def _is_zero(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float, Fraction)) and value in ("", False, 0)


def _quantity_or_self(value: Any) -> Any:
    quantity = parse_quantity(value)  # nano units, as Go's resource.Quantity keeps them
    return value if quantity is None else quantity


def equal(a: Any, b: Any) -> bool:
    """Whether two normal forms are equal (``True`` is not ``1`` here, unlike in Python)."""
    return first_difference(a, b) is None


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first field where two normal forms differ, or None when they are equal
    (what the controller logs when it adopts templates it cannot match)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}"
            found = first_difference(a[k], b[k], f"{path}.{k}")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return path or "."
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if type(a) is type(b) and a == b else path or "."
