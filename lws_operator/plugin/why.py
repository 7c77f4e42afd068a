"""``kubectl lws why NAME [GROUP]``: why a LeaderWorkerSet or one group is not Ready or updated.

The shell half: read everything the diagnosis may need in one round of concurrent requests (the
set, its pods, StatefulSets or Deployment, PodGroups, Events, the admission webhook
registrations, the namespace's labels and the Endpoints of the webhook Services), hand it to
``lws_operator.plugin.analysis.diagnosis`` and print the findings. A read the user may not be
allowed (the cluster-scoped webhook configurations, another namespace's EndpointSlices, a PodGroup
API the cluster does not serve) is skipped and said, never fatal: the diagnosis works with what
it has.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

import yaml
from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api.constants import GROUP, NAME_LABEL, PLURAL, VERSION
from lws_operator.api.view import lws_view
from lws_operator.kube.client import KubeClient, status_message
from lws_operator.plugin.analysis.diagnosis import (
    Diagnosis,
    Finding,
    Scene,
    diagnose,
    webhook_services,
)

if TYPE_CHECKING:
    from lws_operator.plugin.cli import Session

EXIT_OK, EXIT_BLOCKED, EXIT_NOT_FOUND, EXIT_API_ERROR = 0, 1, 3, 4
NATIVE_POD_GROUPS = "/apis/scheduling.k8s.io/v1beta1"
VOLCANO_POD_GROUPS = "/apis/scheduling.volcano.sh/v1beta1"

DESCRIPTION = """\
Say why a LeaderWorkerSet, or one of its groups, is not Ready or not updated: the first
blocking cause found, with its evidence and, where there is one, the command that fixes it.

For a DisaggregatedSet: its own causes first (NotObserved, RolloutPaused, ScalerMissing: an
External role without its scaler, RoleMissing: a role without a LeaderWorkerSet of the target
revision), then the findings of each role LeaderWorkerSet below, marked with its role and name
(the target revision's first: the coordinated rollout waits on its groups). The first line
says where the rollout stands, role by role and slice by slice.

Causes looked for, in the order they are reported (what stops everything comes first, then
each group's first cause):
  NotObserved             the controller has not processed the latest spec (operator down?)
  WebhookUnreachable      the LWS/pod webhook's Service has no ready endpoints, or calls fail
  PodsNotMutated          pods were created without the pod webhook
  FailedCreate            pods or StatefulSets cannot be created (quota, policy)
  RestartBudgetExhausted  a group stopped for good by maxGroupRestarts; how to recover it
  SchedulingGated         a scheduling gate on the group's pods, and who should lift it
  PodGroupIncomplete      a gang (PodGroup minCount, volcano minMember) cannot be placed
  RolloutPaused           the rollout is paused (lws-operator.dev/paused); resume it with
                          kubectl lws rollout resume NAME (a warning while no update runs)
  ProgressDeadlineExceeded  the rollout passed its progress deadline and is held
  RolloutStalled          new-revision pods unschedulable while old groups hold capacity
  Unschedulable           pods the scheduler cannot place, with its message
  GroupReadyGate          a Hash-mode leader held not Ready by its group-ready gate
  PodsNotReady            pods placed but not Ready (a new revision that never starts)
  GroupIncomplete         a group or the set is missing pods
Warnings, which block nothing of the set's:
  EvictionsRefused        a drain or autoscaler waits on the group disruption budget, with
                          the groups it counts disrupted now
  DisruptionBudgetUsed    as many groups disrupted as the budget allows: the next eviction
                          of a healthy group will be refused
  RolledBack              the operator rolled the templates back on the progress deadline
Causes about features only lws-operator has (restart budget, group-ready and
group-replacement gates, native gang scheduling, RolloutStalled, the pause, the progress
deadline and its rollback, the group disruption budget) say so: they do not occur under the
upstream Go controller, whose objects this command reads all the same.
"""

EPILOG = """\
exit codes:
  0  nothing blocks (the set or group is Ready and updated, or only warnings were found)
  1  a blocking cause was found (printed first)
  2  bad command line
  3  the set (LeaderWorkerSet or DisaggregatedSet), or the group or role, does not exist
  4  the API refused or failed a read the diagnosis needs (the set, its pods), the API
     server could not be reached, or the kubeconfig could not be loaded

examples:
  kubectl lws why my-llm                  # the whole set
  kubectl lws -n serving why my-llm 2     # group 2 only (Hash mode: its group key prefix)
  kubectl lws why my-llm -o yaml          # every finding as data
  kubectl lws why my-llm -o json | jq -r '.findings[0].fix'
  kubectl lws why my-disaggregated prefill   # a DisaggregatedSet's prefill role only
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "why", help="why a LeaderWorkerSet or group (a DisaggregatedSet or role) is not Ready "
        "or not updated",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", metavar="NAME", help="the LeaderWorkerSet or DisaggregatedSet")
    parser.add_argument("group", metavar="GROUP", nargs="?",
                        help="one group: its index (Hash mode: its group key or a prefix of "
                             "it), or the name of one of its pods; for a DisaggregatedSet, "
                             "one role")
    parser.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                        help="text for people (default), or the findings as json or yaml")
    parser.set_defaults(run=run, api_error_exit=EXIT_API_ERROR)


# ------------------------------------------------------------------------------ reading


class Reader:
    """Reads for one diagnosis; optional reads that fail are noted, not raised."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.skipped: list[str] = []

    async def items(self, path: str, selector: str | None = None,
                    what: str = "") -> list[dict[str, Any]]:
        query = {"labelSelector": selector} if selector else None
        try:
            answer = await self.kube.request("GET", path, query=query)
        except ApiException as exc:
            if exc.status != 404:  # an API the cluster does not serve is no news
                self.skipped.append(f"{what or path}: {status_message(exc)}")
            return []
        return list(answer.get("items") or [])

    async def one(self, path: str, what: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get(path)
        except ApiException as exc:
            self.skipped.append(f"{what}: {status_message(exc)}")
            return None


async def read_scene(kube: KubeClient, lws: Mapping[str, Any], reader: Reader) -> Scene:
    """Everything but the set itself, concurrently; then the webhook Services' endpoints."""
    view = lws_view(lws)
    ns, name = view.namespace, view.name
    selector = f"{NAME_LABEL}={name}"
    base = f"/api/v1/namespaces/{ns}"
    apps = f"/apis/apps/v1/namespaces/{ns}"
    admission = "/apis/admissionregistration.k8s.io/v1"
    reads: dict[str, Awaitable[Any]] = {
        "pods": reader.items(f"{base}/pods", selector, "pods"),
        "statefulsets": reader.items(f"{apps}/statefulsets", selector, "statefulsets"),
        "events": reader.items(f"{base}/events", None, "events"),
        "pod_groups": reader.items(f"{NATIVE_POD_GROUPS}/namespaces/{ns}/podgroups", selector,
                                   "podgroups.scheduling.k8s.io"),
        "volcano_groups": reader.items(f"{VOLCANO_POD_GROUPS}/namespaces/{ns}/podgroups", None,
                                       "podgroups.scheduling.volcano.sh"),
        "mutating": reader.items(f"{admission}/mutatingwebhookconfigurations", None,
                                 "mutatingwebhookconfigurations"),
        "validating": reader.items(f"{admission}/validatingwebhookconfigurations", None,
                                   "validatingwebhookconfigurations"),
        "namespace": reader.one(base, f"namespace {ns}"),
    }
    if view.hashed:
        reads["deployment"] = reader.one(f"{apps}/deployments/{quote(name)}",
                                         f"deployment {name}")
    got = dict(zip(reads, await asyncio.gather(*reads.values()), strict=True))
    configurations = [{**c, "kind": "MutatingWebhookConfiguration"} for c in got["mutating"]] \
        + [{**c, "kind": "ValidatingWebhookConfiguration"} for c in got["validating"]]
    namespace = got["namespace"]
    scene = Scene(
        lws=lws, pods=got["pods"], statefulsets=got["statefulsets"],
        deployment=got.get("deployment"), pod_groups=got["pod_groups"],
        volcano_groups=got["volcano_groups"], events=got["events"],
        webhook_configurations=configurations,
        namespace_labels=((namespace.get("metadata") or {}).get("labels") or {})
        if namespace is not None else None,
        now=time.time())
    services = webhook_services(scene)
    answers = await asyncio.gather(*(_endpoints(reader, s) for s in services))
    known = {s: a for s, a in zip(services, answers, strict=True) if a is not UNKNOWN}
    return dataclasses.replace(scene, endpoint_slices=known)


UNKNOWN: list[dict[str, Any]] = []


async def _endpoints(reader: Reader, service: str) -> list[dict[str, Any]] | None:
    """The Service's EndpointSlices; None when the Service does not exist; ``UNKNOWN`` when
    either could not be read (the diagnosis then says nothing about that Service)."""
    ns, name = service.split("/", 1)
    try:
        found = await reader.kube.get(f"/api/v1/namespaces/{ns}/services/{quote(name)}")
        if found is None:
            return None
        answer = await reader.kube.request(
            "GET", f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
            query={"labelSelector": f"kubernetes.io/service-name={name}"})
    except ApiException as exc:
        reader.skipped.append(f"endpoints of service {service}: {status_message(exc)}")
        return UNKNOWN
    return list(answer.get("items") or [])


# ------------------------------------------------------------------------------ printing


def render(diagnosis: Diagnosis, out: TextIO) -> None:
    """The human form: the state in one line, the first cause in full, the others in one line
    each."""
    what = f"LeaderWorkerSet {diagnosis.namespace}/{diagnosis.name}"
    if diagnosis.group is not None:
        what += f" group {diagnosis.group}"
    print(f"{what}: {diagnosis.summary}", file=out)
    findings = list(diagnosis.findings)
    if not findings:
        print("Nothing blocks it." if diagnosis.ready and diagnosis.updated else
              "No blocking cause found: its groups are on their way.", file=out)
        return
    render_findings(findings, out)


def render_findings(findings: Sequence[Finding], out: TextIO) -> None:
    """The first finding in full (evidence, fix, hint, whether it is lws-operator's only), the
    others in one line each: the layout of ``why`` for either kind of set."""
    first, rest = findings[0], findings[1:]
    print(f"{'Blocked by' if first.blocking else 'Warning'}: {first.cause}: {first.summary}",
          file=out)
    for line in first.evidence:
        print(f"  - {line}", file=out)
    if first.fix:
        print(f"  fix: {first.fix}", file=out)
    if first.hint:
        print(f"  hint: {first.hint}", file=out)
    if first.ours:
        print(f"  note: lws-operator only: the upstream Go controller has no {first.ours}",
              file=out)
    if rest:
        print("Also:", file=out)
        for finding in rest:
            tag = "" if finding.blocking else " (warning)"
            print(f"  {finding.cause}{tag}: {finding.summary}", file=out)


def _dump(diagnosis: Diagnosis, output: str, skipped: Sequence[str], out: TextIO) -> None:
    data = diagnosis.as_dict()
    data["unread"] = list(skipped)
    if output == "json":
        json.dump(data, out, indent=2)
        out.write("\n")
    else:
        yaml.safe_dump(data, out, sort_keys=False, width=100)


async def run(session: Session, args: argparse.Namespace) -> int:
    return await why(session.kube, session.namespace, args.name, args.group, args.output,
                     sys.stdout, sys.stderr)


async def _why_ds(kube: KubeClient, namespace: str, name: str, role: str | None, output: str,
                  out: TextIO, err: TextIO) -> int:
    """NAME is no LeaderWorkerSet: a DisaggregatedSet's diagnosis (``plugin.why_ds``), or not
    found."""
    from lws_operator.plugin.disaggregated import ds_path
    from lws_operator.plugin.why_ds import why_ds

    try:
        ds = await kube.get(ds_path(namespace, name))
    except ApiException as exc:
        print(f"error: reading DisaggregatedSet {namespace}/{name}: {status_message(exc)}",
              file=err)
        return EXIT_API_ERROR
    if ds is None:
        print(f"error: LeaderWorkerSet or DisaggregatedSet {namespace}/{name} not found",
              file=err)
        return EXIT_NOT_FOUND
    return await why_ds(kube, ds, role, output, out, err)


async def why(kube: KubeClient, namespace: str, name: str, group: str | None, output: str,
              out: TextIO, err: TextIO) -> int:
    """The whole command; its exit code."""
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{quote(name)}"
    try:
        lws = await kube.get(path)
    except ApiException as exc:
        print(f"error: reading LeaderWorkerSet {namespace}/{name}: {status_message(exc)}",
              file=err)
        return EXIT_API_ERROR
    if lws is None:
        return await _why_ds(kube, namespace, name, group, output, out, err)
    reader = Reader(kube)
    scene = await read_scene(kube, lws, reader)
    if any(s.startswith("pods:") for s in reader.skipped):
        print(f"error: reading the pods of {namespace}/{name}: {reader.skipped[0]}", file=err)
        return EXIT_API_ERROR
    try:
        diagnosis = diagnose(scene, group)
    except LookupError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_NOT_FOUND
    if output == "text":
        render(diagnosis, out)
        for skipped in reader.skipped:
            print(f"(not read: {skipped})", file=err)
    else:
        _dump(diagnosis, output, reader.skipped, out)
    return EXIT_BLOCKED if diagnosis.blocked else EXIT_OK

