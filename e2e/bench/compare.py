"""The three sides side by side: which side runs when, ours over upstream's figure by figure,
cost per pod, and the text table of the three. Pure functions over the JSON summary.

A side is ``raw`` (plain StatefulSets: the control plane's floor), ``ours`` (the operator) or
``upstream`` (the upstream Go controller); in the summary they are ``baseline``, ``operator``
and ``upstream``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from e2e.bench.figures import floor_ratio
from e2e.bench.targets import dig, request_counts

SIDES = ("raw", "ours", "upstream")
KEY = {"raw": "baseline", "ours": "operator", "upstream": "upstream"}
TIMED = ("create", "rollout", "delete")
CPU_PHASES = ("create", "steady", "rollout", "delete", "total")
REQUEST_PHASES = ("create", "steady", "rollout", "delete")

Summary = Mapping[str, Any]


def parse_sides(text: str) -> tuple[str, ...]:
    """``--sides``: a comma-separated subset of ``SIDES`` that holds raw and ours (every ratio
    is to raw, and the summary is built around ours), in the canonical order."""
    chosen = {s.strip() for s in text.split(",") if s.strip()}
    unknown = chosen - set(SIDES)
    if unknown:
        raise ValueError(f"--sides: unknown side {', '.join(sorted(unknown))} "
                         f"(choose from {', '.join(SIDES)})")
    if not {"raw", "ours"} <= chosen:
        raise ValueError("--sides must include raw and ours")
    return tuple(s for s in SIDES if s in chosen)


def side_order(sides: Sequence[str], index: int) -> list[str]:
    """The order of round ``index`` (0-based): the sides rotated by one per round, so over the
    rounds each side goes first, second and last equally often (whatever one side leaves the
    next, etcd's history, caches, favours none)."""
    if not sides:
        return []
    shift = index % len(sides)
    return [*sides[shift:], *sides[:shift]]


def ratio(ours: Any, theirs: Any) -> float | None:
    if not isinstance(ours, (int, float)) or not isinstance(theirs, (int, float)) or not theirs:
        return None
    return round(ours / theirs, 3)


def counted(summary: Summary, side: str, phase: str, what: str = "counted") -> int | None:
    """A side's requests of one phase in the issue's terms (``targets.request_counts`` for
    ours, ``upstream.request_counts`` for upstream's)."""
    if side == "ours":
        counts = request_counts(dig(summary, "operator", "api_requests", phase))
        return None if counts is None else counts[what]
    value = dig(summary, KEY[side], "api_requests_counted", phase, what)
    return value if isinstance(value, int) else None


def figures_of(summary: Summary, side: str) -> dict[str, Any]:
    """A side's figures, flat: wall seconds per phase, first pod Ready, and for a controller
    CPU per phase, requests and status patches per phase, peak memory (shared pages once, and
    the RSS sum) and work-queue wait p99."""
    key = KEY[side]
    out: dict[str, Any] = {f"{p}.seconds": dig(summary, key, p, "seconds") for p in TIMED}
    out["first_ready_s"] = dig(summary, key, "create", "first_ready_seconds")
    for phase in TIMED:
        out[f"{phase}.machine_cpu_s"] = dig(summary, key, phase, "cpu_seconds_by_process",
                                            "machine")
    if side == "raw":
        return out
    for phase in CPU_PHASES:
        out[f"{phase}.cpu_s"] = dig(summary, key, "cpu_seconds", phase)
    for phase in REQUEST_PHASES:
        out[f"{phase}.requests"] = counted(summary, side, phase)
    for phase in ("create", "rollout"):
        out[f"{phase}.status_patches"] = counted(summary, side, phase, "status_patches")
    out["peak_shared_once_mib"] = peak_shared_once(summary, side)
    out["peak_rss_mib"] = dig(summary, key, "memory_mib", "peak_rss")
    out["work_queue_wait_p99_s"] = dig(summary, key, "work_queue_wait_seconds", "p99")
    return out


def peak_shared_once(summary: Summary, side: str) -> float | None:
    """A controller's peak memory with the pages its processes share counted once (the
    figure the memory targets are held to, ``e2e.bench.process.TreeMemory``); a run recorded
    before it was measured gives None for ours, and upstream's peak RSS for upstream's (one
    process: the same figure)."""
    memory = dig(summary, KEY[side], "memory_mib")
    if not isinstance(memory, Mapping):
        return None
    value = memory.get("peak_rss_shared_once")
    if value is None and side == "upstream":
        value = memory.get("peak_rss")
    return value if isinstance(value, (int, float)) else None


def versus_upstream(summary: Summary) -> dict[str, float | None] | None:
    """Ours over upstream's, figure by figure (``figures_of``; below 1 is ours better), and
    ``zero_cpu_bound`` per timed phase; None without an upstream side."""
    if not isinstance(summary.get("upstream"), Mapping):
        return None
    ours, theirs = figures_of(summary, "ours"), figures_of(summary, "upstream")
    out = {name: ratio(ours[name], theirs.get(name)) for name in ours}
    for phase in ("create", "rollout"):
        out[f"{phase}.zero_cpu_bound"] = zero_cpu_bound(summary, phase)
    return out


def zero_cpu_bound(summary: Summary, phase: str) -> float | None:
    """The lowest ours-over-upstream wall ratio of ``phase`` that any work of the operator's
    own could reach in this round: our side's machine CPU less the operator's processes (a
    controller costing no CPU, sending the same requests), over upstream's side's machine CPU.

    Where the control plane shares the machine's cores with the controllers (2 cores here),
    every phase keeps them busy and a side's wall time follows its machine CPU: the rounds'
    wall ratios equal their machine CPU ratios within 1 %. Both controllers then wait on the
    same control plane doing nearly the same work for them (pods, StatefulSets, the garbage
    collector), so a wall target under this bound is out of reach of the operator's code and
    its gap to the bound is all the operator's CPU can still win. ``figures.floor_ratio`` with
    upstream's side in the raw side's place; None without CPU figures."""
    return floor_ratio(dig(summary, KEY["ours"], phase, "cpu_seconds_by_process"),
                       dig(summary, KEY["upstream"], phase, "cpu_seconds_by_process"))


def to_raw(summary: Summary, side: str) -> dict[str, float | None]:
    """A side's wall seconds per phase over raw StatefulSets'."""
    return {p: ratio(dig(summary, KEY[side], p, "seconds"), dig(summary, "baseline", p, "seconds"))
            for p in TIMED}


def per_pod(summary: Summary, side: str = "ours") -> dict[str, float | None]:
    """A controller's cost per pod: requests, status patches and CPU milliseconds per pod of
    create and rollout, so the default and the large profile compare (target: not growing)."""
    pods = dig(summary, "profile", "pods")
    figures = figures_of(summary, side)
    out: dict[str, float | None] = {}
    for phase in ("create", "rollout"):
        for name, value, scale in (
                ("requests", figures[f"{phase}.requests"], 1.0),
                ("status_patches", figures[f"{phase}.status_patches"], 1.0),
                ("cpu_ms", figures[f"{phase}.cpu_s"], 1000.0)):
            out[f"{phase}.{name}"] = (round(value * scale / pods, 4)
                                      if isinstance(value, (int, float)) and pods else None)
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


ROWS = (("create wall s", "create.seconds"), ("rollout wall s", "rollout.seconds"),
        ("delete wall s", "delete.seconds"), ("first pod Ready s", "first_ready_s"),
        ("CPU s create", "create.cpu_s"), ("CPU s steady", "steady.cpu_s"),
        ("CPU s rollout", "rollout.cpu_s"), ("CPU s delete", "delete.cpu_s"),
        ("requests create", "create.requests"), ("requests steady", "steady.requests"),
        ("requests rollout", "rollout.requests"), ("requests delete", "delete.requests"),
        ("status patches create", "create.status_patches"),
        ("status patches rollout", "rollout.status_patches"),
        ("peak MiB, shared pages once", "peak_shared_once_mib"),
        ("peak RSS MiB, processes added", "peak_rss_mib"),
        ("work-queue wait p99 s", "work_queue_wait_p99_s"),
        ("machine CPU s create", "create.machine_cpu_s"),
        ("machine CPU s rollout", "rollout.machine_cpu_s"),
        ("machine CPU s delete", "delete.machine_cpu_s"))


def sides_table(summary: Summary) -> str:
    """Every figure of each side, and ours over upstream's, as aligned text (the medians of a
    repeated run; ``ours/upstream`` is the median of the rounds' ratios)."""
    present = [s for s in SIDES if isinstance(summary.get(KEY[s]), Mapping)]
    columns = {s: figures_of(summary, s) for s in present}
    versus = summary.get("vs_upstream") or {}
    head = ["figure", *present] + (["ours/upstream"] if "upstream" in present else [])
    lines = [head]
    for label, key in ROWS:
        row = [label, *(_cell(columns[s].get(key)) for s in present)]
        if "upstream" in present:
            row.append(_cell(versus.get(key)))
        lines.append(row)
    for phase in TIMED:
        row = [f"{phase} wall ratio to raw", *(_cell(to_raw(summary, s)[phase]) for s in present)]
        lines.append([*row, ""] if "upstream" in present else row)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True))
                     .rstrip() for line in lines)
