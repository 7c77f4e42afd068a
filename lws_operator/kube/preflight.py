"""Startup checks: what the operator needs from the cluster, verified once before it starts.

Without them a missing namespace or permission shows up later as an endless series of retried
404s and 403s with tracebacks (a crash loop in a pod). Here each missing piece becomes one line
naming it, and the process stops. The LeaderWorkerSet CRD is not one of them: it is often
applied a moment before the operator starts (``make run``, a Helm install) and served a moment
after, so the controllers wait for it (``kube.api_served``), not ready meanwhile. Permissions
are asked with SelfSubjectAccessReviews, which every authenticated identity may create, so the
check itself needs no extra RBAC.

The volcano scheduler provider (``--scheduler-provider volcano``) without Volcano's PodGroup CRD
is such a missing piece too, and stops the start rather than degrading to "no gang scheduling".
Whoever configures a gang scheduler relies on all-or-nothing placement: groups without their
PodGroup get partly scheduled, holding accelerators while they wait for the rest (the deadlock
gang scheduling exists to prevent), or, with ``schedulerName: volcano`` and Volcano absent, stay
Pending with nothing saying why; and every pass would fail to create the PodGroup. A start that
fails, with one line naming the setting and the CRD, is seen at once (a crash-looping pod)
and heals by itself once Volcano is installed (the next restart passes); running without it
would be noticed only when workloads misbehave. Upstream's manager does not run in that state
either: the controller that owns volcano PodGroups cannot start its watch on them.

The DisaggregatedSet controller is different: it is optional (it runs only where its API is
served), and the LeaderWorkerSet controller does not need it. When the DisaggregatedSet API is
served at start, its permissions are checked like the others and listed the same way, but a
missing one does not stop the start: ``check`` returns the line (``lws-operator run`` logs it
as an error) and the DisaggregatedSet controller then fails to start with a 403, which
``controllers.runtime`` logs while the LeaderWorkerSet controller goes on. Refusing the whole
start would turn RBAC from an older chart plus newly applied CRDs into a crash loop of the
LeaderWorkerSet controller too, at its next restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from lws_operator.api import disaggregated as ds
from lws_operator.api.constants import GROUP, PLURAL
from lws_operator.kube.api_served import discovery_lists
from lws_operator.kube.client import ApiException, KubeClient, is_status, status_message

__all__ = ["AdmissionNeeds", "Permission", "StartupError", "check", "disaggregated_permissions",
           "missing", "needed_permissions"]


class StartupError(RuntimeError):
    """Something the operator needs is missing; ``problems`` has one line per missing piece."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class Permission:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""  # one object (RBAC may grant by resourceNames)

    def __str__(self) -> str:
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            what += f"/{self.subresource}"
        if self.name:
            what += f" {self.name}"
        where = f" in namespace {self.namespace}" if self.namespace else " (cluster-wide)"
        return f"{self.verb} {what}{where}"


@dataclass(frozen=True)
class AdmissionNeeds:
    """The objects the admission side touches: the certificate Secret (read, and written when
    we manage the certificates) and the two webhook configurations (their caBundles, when we
    manage the certificates); and whether /metrics reviews tokens and access."""

    secret: str = ""
    mutating: str = ""
    validating: str = ""
    manage_certificates: bool = True
    review_metrics: bool = False


VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_VERSION = "v1beta1"
VOLCANO_PLURAL = "podgroups"


def needed_permissions(*, namespace: str, controllers: bool, lease_namespace: str | None,
                       admission: AdmissionNeeds | None = None,
                       volcano: bool = False) -> list[Permission]:
    """What the admission side (always), the controllers and leader election (when on) do,
    and with ``volcano`` the controllers' volcano PodGroups. Objects are named where the
    operator only ever touches one, so RBAC granting just that object (``resourceNames``)
    passes."""
    needs = admission or AdmissionNeeds()
    # The certificate objects are watched (``kube.named_watch``): list and watch by name.
    verbs = ("get", "list", "watch", "update") if needs.manage_certificates \
        else ("get", "list", "watch")
    out = [Permission(verb, "", "secrets", namespace=namespace, name=needs.secret)
           for verb in verbs]
    if needs.manage_certificates:
        out += [Permission(verb, "admissionregistration.k8s.io", kind, name=name)
                for kind, name in (("mutatingwebhookconfigurations", needs.mutating),
                                   ("validatingwebhookconfigurations", needs.validating))
                for verb in ("get", "list", "watch", "update")]
    if needs.review_metrics:
        out += [Permission("create", "authentication.k8s.io", "tokenreviews"),
                Permission("create", "authorization.k8s.io", "subjectaccessreviews")]
    if controllers:
        # get: the eviction guard reads a set again after a conflicting reservation write
        kinds = [(GROUP, PLURAL, ("get", "list", "watch", "patch")),
                 ("apps", "statefulsets", ("list", "watch", "create", "patch", "delete")),
                 ("apps", "deployments", ("list", "watch", "patch")),  # Hash leaders
                 ("", "pods", ("list", "watch", "patch", "delete")),
                 ("", "services", ("list", "watch", "create")),
                 # update and patch: a revision's number and annotations (logic.identity.writes)
                 ("apps", "controllerrevisions",
                  ("list", "watch", "create", "update", "patch", "delete"))]
        out += [Permission(verb, group, resource)
                for group, resource, verbs in kinds for verb in verbs]
        out.append(Permission("patch", GROUP, PLURAL, "status"))
        out.append(Permission("patch", "", "pods", "status"))  # Hash: the group-ready condition
        out.append(Permission("create", "events.k8s.io", "events"))
        out.append(Permission("get", "", "nodes"))  # exclusive placement reads the leader's
        if volcano:
            out += [Permission(verb, VOLCANO_GROUP, VOLCANO_PLURAL)
                    for verb in ("list", "watch", "create")]
    if lease_namespace is not None:
        out += [Permission(verb, "coordination.k8s.io", "leases", namespace=lease_namespace)
                for verb in ("get", "create", "update")]
    return out


def disaggregated_permissions() -> list[Permission]:
    """What the DisaggregatedSet controller does beyond the LeaderWorkerSet controller's
    requests (which it also makes: patch LeaderWorkerSets, create Services and Events, and
    list, watch, create, update, patch and delete ControllerRevisions for the sets' revision
    history, ``logic.disaggregated.history``): read
    sets and write their status, create and delete child LeaderWorkerSets and role scalers,
    write the scalers' status, delete the Services of drained revisions."""
    kinds = [(ds.GROUP, ds.PLURAL, ("list", "watch")),
             (ds.GROUP, ds.SCALER_PLURAL, ("list", "watch", "create", "delete")),
             (GROUP, PLURAL, ("create", "delete")),
             ("", "services", ("delete",))]
    out = [Permission(verb, group, resource) for group, resource, verbs in kinds
           for verb in verbs]
    out.append(Permission("patch", ds.GROUP, ds.PLURAL, "status"))
    out.append(Permission("patch", ds.GROUP, ds.SCALER_PLURAL, "status"))
    return out


# SelfSubjectAccessReviews in flight at once (``missing``). All of them at once (about 50 at a
# start) opened as many TLS connections to the API server, each a handshake, which idled out of
# the pool seconds later while the memory they had taken stayed with the process; a few reuse
# their connections and take no longer (docs/performance.md, "Memory").
REVIEWS_IN_FLIGHT = 4


async def missing(kube: KubeClient, permissions: Iterable[Permission]) -> list[Permission]:
    """The ``permissions`` this identity lacks (SelfSubjectAccessReviews, ``REVIEWS_IN_FLIGHT``
    at a time)."""
    wanted = list(permissions)
    slots = asyncio.Semaphore(REVIEWS_IN_FLIGHT)

    async def allowed(permission: Permission) -> bool:
        async with slots:
            return await _allowed(kube, permission)

    answers = await asyncio.gather(*(allowed(p) for p in wanted))
    return [p for p, ok in zip(wanted, answers, strict=True) if not ok]


async def _allowed(kube: KubeClient, permission: Permission) -> bool:
    attributes = {"verb": permission.verb, "group": permission.group,
                  "resource": permission.resource}
    if permission.subresource:
        attributes["subresource"] = permission.subresource
    if permission.namespace:
        attributes["namespace"] = permission.namespace
    if permission.name:
        attributes["name"] = permission.name
    review = await kube.request(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": attributes}})
    return bool((review.get("status") or {}).get("allowed"))


async def _namespace_missing(kube: KubeClient, namespace: str) -> bool:
    """True only if the API server says the namespace does not exist (an identity that may not
    read namespaces, as the operator's own may not, learns nothing here and goes on)."""
    try:
        await kube.request("GET", f"/api/v1/namespaces/{namespace}")
    except ApiException as exc:
        if is_status(exc, 404):
            return True
        if is_status(exc, 401, 403):
            return False
        raise
    return False


async def _served(kube: KubeClient, group: str, version: str, plural: str) -> bool:
    """Whether discovery lists ``plural`` under ``group/version``."""
    return await discovery_lists(kube, f"/apis/{group}/{version}", plural)


async def check(kube: KubeClient, *, namespace: str, controllers: bool,
                lease_namespace: str | None, admission: AdmissionNeeds | None = None,
                extra: Iterable[Permission] = (), volcano: str | None = None) -> list[str]:
    """Raise ``StartupError`` listing everything missing: namespaces, Volcano's CRD when
    asked for, permissions (the LeaderWorkerSet CRD is waited for instead: module docstring).
    ``volcano``: the setting that chose the volcano scheduler provider, as the message names
    it (``--scheduler-provider``), or None; its CRD and permissions are the controllers'.
    Returns what is missing without stopping the start: the DisaggregatedSet controller's
    permissions, when its API is served (the module docstring says why)."""
    problems: list[str] = []
    for ns in dict.fromkeys(n for n in (namespace, lease_namespace) if n):
        if await _namespace_missing(kube, ns):
            problems.append(f"the operator namespace {ns!r} does not exist "
                            f"(create it, or pass --namespace)")
    volcano_needed = controllers and volcano is not None
    if volcano_needed and not await _served(kube, VOLCANO_GROUP, VOLCANO_VERSION,
                                            VOLCANO_PLURAL):
        problems.append(f"{volcano} volcano: the CustomResourceDefinition "
                        f"{VOLCANO_PLURAL}.{VOLCANO_GROUP} (version {VOLCANO_VERSION}) is not "
                        "installed: install Volcano, or run without a scheduler provider")
    permissions = [*needed_permissions(namespace=namespace, controllers=controllers,
                                       lease_namespace=lease_namespace, admission=admission,
                                       volcano=volcano_needed),
                   *extra]
    optional = (disaggregated_permissions() if controllers and await _served(
        kube, ds.GROUP, ds.VERSION, ds.PLURAL) else [])
    try:
        denied = await missing(kube, permissions)
        denied_optional = await missing(kube, optional)
    except ApiException as exc:
        raise StartupError([*problems, "cannot check permissions "
                            f"(SelfSubjectAccessReview: {exc.status} {status_message(exc)})"]
                           ) from None
    if denied:
        problems.append("missing permissions: " + ", ".join(map(str, denied)))
    if problems:
        raise StartupError(problems)
    if denied_optional:
        return ["the DisaggregatedSet controller will not run: missing permissions: "
                + ", ".join(map(str, denied_optional))
                + " (the LeaderWorkerSet controller runs; grant them and restart)"]
    return []
