"""``kubectl lws plan NAME`` for a DisaggregatedSet: the coordinated rollout's step table, from
the controller's own planner (``plugin.analysis.ds_rollout``); nothing is written.

With a change (``-f``, ``--set-image``), the rollout that change would walk from the live state;
without one, the rollout under way (from its start, the live step marked), or that there is
none. Reads only: the set, the children and role scalers it controls.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from lws_operator.logic.disaggregated.revision import target_revision
from lws_operator.plugin.analysis.ds_change import proposed_ds, replicas_change, rollout_cause
from lws_operator.plugin.analysis.ds_rollout import (
    SliceRollout,
    position,
    proposed_rollout,
    step_kind,
    steps_data,
)
from lws_operator.plugin.analysis.set_change import ChangeError, ImageChange
from lws_operator.plugin.disaggregated import DsScene, read_scene
from lws_operator.plugin.output import Paint, colour_enabled, dump


def step_table(rollout: SliceRollout, paint: Paint, mark: bool) -> list[str]:
    """One row per state: each role's old|new groups and what the step does; ``mark``: the
    live state's row is marked with ``◀ now``."""
    heads = [f"{role.upper()} OLD|NEW" for role in rollout.roles]
    cells = [[f"{o}|{n}" for o, n in zip(s.past, s.new, strict=True)] for s in rollout.steps]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(heads)]
    lines = ["STEP  " + "  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True))
             + "  ACTION"]
    for i, (state, row) in enumerate(zip(rollout.steps, cells, strict=True)):
        action = "start" if i == 0 else step_kind(rollout.steps[i - 1], state)
        line = (f"{str(i).ljust(4)}  "
                + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + f"  {action}")
        if mark and i == rollout.index:
            line = paint(line + "  ◀ now", "bold")
        lines.append(line)
    return lines


def _slices_text(rollouts: Sequence[SliceRollout], paint: Paint, mark: bool) -> list[str]:
    """Each slice's table; slices whose walks are the same are shown once."""
    lines: list[str] = []
    shown: list[SliceRollout] = []
    for rollout in rollouts:
        same = next((s for s in shown if s.steps == rollout.steps and s.index == rollout.index),
                    None)
        if same is not None:
            lines.append(f"slice {rollout.slice}: as slice {same.slice}")
            continue
        shown.append(rollout)
        olds = ", ".join(rollout.old_revisions) or "none"
        where = f"; {position(rollout)}" if mark else ""
        lines += ["", f"slice {rollout.slice} (revision {olds} → {rollout.revision}{where}):"]
        lines += step_table(rollout, paint, mark)
    return lines


def _in_flight(scene: DsScene, paint: Paint, data: dict[str, Any]) -> list[str]:
    rollouts = scene.rollouts()
    data["rollout"] = any(r.in_progress for r in rollouts)
    data["slices"] = [steps_data(r) for r in rollouts]
    name = f"{scene.view.namespace}/{scene.view.name}"
    if not data["rollout"]:
        return [f"{paint('No rollout', 'bold')} under way for DisaggregatedSet {name} (revision "
                f"{scene.revision}): give -f or --set-image to plan a change. Nothing was "
                "written."]
    lines = [f"{paint('Rollout under way', 'bold')} of DisaggregatedSet {name} to revision "
             f"{scene.revision}: the controller takes a step once the new revision's groups "
             "are all Ready. Nothing was written."]
    return lines + _slices_text([r for r in rollouts if r.in_progress], paint, mark=True)


def _change(scene: DsScene, new: Mapping[str, Any], paint: Paint,
            data: dict[str, Any]) -> list[str]:
    name = f"{scene.view.namespace}/{scene.view.name}"
    cause = rollout_cause(scene.ds, new)
    scaled = replicas_change(scene.ds, new)
    data.update(rollout=cause is not None, cause=cause, replicas=scaled)
    scale = f"; replicas {', '.join(scaled)}" if scaled else ""
    if cause is None:
        data["slices"] = []
        return [f"{paint('No rollout', 'bold')} for DisaggregatedSet {name}: the role templates "
                f"are unchanged, no group is replaced{scale}. Nothing was written."]
    revision = target_revision(new, scene.children)
    rollouts = [proposed_rollout(new, scene.children, revision, k, scene.scalers)
                for k in range(scene.view.slices)]
    data["revision"] = revision
    data["slices"] = [steps_data(r) for r in rollouts]
    lines = [f"{paint('Coordinated rolling update', 'bold')} of DisaggregatedSet {name} to "
             f"revision {revision}: {cause}, so every role is replaced{scale}. Each step is "
             "taken once the new revision's groups are all Ready. Nothing was written."]
    return lines + _slices_text(rollouts, paint, mark=False)


async def plan_ds(kube: Any, live: Mapping[str, Any], args: argparse.Namespace,
                  images: Sequence[ImageChange], manifest: Mapping[str, Any] | None) -> int:
    """The whole command for a DisaggregatedSet; its exit code (``plan``'s)."""
    if args.replicas is not None or args.size is not None:
        print("Error: --replicas and --size are a LeaderWorkerSet's; for a DisaggregatedSet "
              "give its roles' new spec with -f", file=sys.stderr)
        return 2
    try:
        new = proposed_ds(live, manifest=manifest, images=images) \
            if manifest is not None or images else None
    except ChangeError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    scene = await read_scene(kube, live)
    out = sys.stdout
    paint = Paint(colour_enabled(out))
    data: dict[str, Any] = {"kind": "DisaggregatedSet", "namespace": scene.view.namespace,
                            "name": scene.view.name, "currentRevision": scene.revision,
                            "change": new is not None}
    lines = _in_flight(scene, paint, data) if new is None else _change(scene, new, paint, data)
    out.write(dump(data, args.output) if args.output else "\n".join(lines) + "\n")
    return 0
