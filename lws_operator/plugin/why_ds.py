"""``kubectl lws why NAME [ROLE]`` for a DisaggregatedSet: the shell half.

Reads the set with what it controls (``plugin.disaggregated``), runs the LeaderWorkerSet
diagnosis on each child it controls (its reads are ``why``'s own, the children's together),
and hands everything to ``plugin.analysis.ds_diagnosis``. The exit codes are ``why``'s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, TextIO

import yaml

from lws_operator.kube.client import KubeClient
from lws_operator.logic.disaggregated import slices
from lws_operator.plugin.analysis.diagnosis import diagnose
from lws_operator.plugin.analysis.ds_diagnosis import (
    ChildDiagnosis,
    DsDiagnosis,
    ds_diagnosis,
    set_findings,
)
from lws_operator.plugin.disaggregated import read_scene
from lws_operator.plugin.why import (
    EXIT_API_ERROR,
    EXIT_BLOCKED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    Reader,
    render_findings,
)
from lws_operator.plugin.why import read_scene as read_lws_scene


async def why_ds(kube: KubeClient, ds: Mapping[str, Any], role: str | None, output: str,
                 out: TextIO, err: TextIO) -> int:
    """The whole command for a DisaggregatedSet; its exit code."""
    scene = await read_scene(kube, ds)
    view = scene.view
    known = {r.name for r in view.roles} | {slices.role_of(c) for c in scene.children}
    if role is not None and role not in known:
        print(f"error: DisaggregatedSet {view.namespace}/{view.name} has no role {role!r} "
              f"(roles: {', '.join(r.name for r in view.roles)})", file=err)
        return EXIT_NOT_FOUND
    reader = Reader(kube)
    mine = [c for c in scene.children if role is None or slices.role_of(c) == role]
    scenes = await asyncio.gather(*(read_lws_scene(kube, c, reader) for c in mine))
    if any(s.startswith("pods:") for s in reader.skipped):
        print(f"error: reading the pods of {view.namespace}/{view.name}: "
              f"{reader.skipped[0]}", file=err)
        return EXIT_API_ERROR
    children = [ChildDiagnosis(role=slices.role_of(c), slice=slices.slice_index_of(c) or 0,
                               revision=slices.revision_label(c),
                               current=slices.revision_label(c) == scene.revision,
                               diagnosis=diagnose(lws_scene))
                for c, lws_scene in zip(mine, scenes, strict=True)]
    own = set_findings(ds, scene.children, scene.scalers, scene.revision)
    diagnosis = ds_diagnosis(ds, scene.verdict(), own, children, role)
    if output == "text":
        render(diagnosis, out)
        for skipped in dict.fromkeys(reader.skipped):
            print(f"(not read: {skipped})", file=err)
    else:
        data = diagnosis.as_dict()
        data["unread"] = list(dict.fromkeys(reader.skipped))
        if output == "json":
            json.dump(data, out, indent=2)
            out.write("\n")
        else:
            yaml.safe_dump(data, out, sort_keys=False, width=100)
    return EXIT_BLOCKED if diagnosis.blocked else EXIT_OK


def render(diagnosis: DsDiagnosis, out: TextIO) -> None:
    """The human form: the rollout's state in one line, the first cause in full, the others in
    one line each (``why``'s layout)."""
    what = f"DisaggregatedSet {diagnosis.namespace}/{diagnosis.name}"
    if diagnosis.role is not None:
        what += f" role {diagnosis.role}"
    print(f"{what}: {diagnosis.summary}", file=out)
    if not diagnosis.findings:
        print("Nothing blocks it." if diagnosis.available else
              "No blocking cause found: its roles are on their way.", file=out)
        return
    render_findings(diagnosis.findings, out)
