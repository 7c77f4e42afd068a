"""The performance issue's table, computed from a benchmark summary: every figure next to its
target, upstream's figure and the change since the previous run. Pure functions over the JSON
summary (``scale.summarize``'s dict), so a summary of any earlier run, read back from the
history, gives the same rows to compare with (a figure an older summary lacks is None).

How requests are counted, as the issue counts them: every request of the operator's client (its
``lws_operator_api_requests_total``, failures included; watches are counted when they start),
except leader election's Lease requests, which are reported on a line of their own (upstream was
measured with leader election off). Events are included. The certificate and webhook
configuration requests (Secrets, Mutating/ValidatingWebhookConfigurations) are included and also
named apart, since the issue's steady-state figure is made of them.

Upstream's figures and ours before the work come from the issue: the upstream Go controller v0.10
measured side by side on the same 2-core machine, the default profile (800 pods), means of four
runs. They are a reference for the default profile only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.bench.workloads import PROFILES
from e2e.harness.metrics import WRITE_VERBS

Summary = Mapping[str, Any]
LEASES = "leases"
CERTIFICATES = ("secrets", "mutatingwebhookconfigurations", "validatingwebhookconfigurations")
STATUS = "leaderworkersets/status"
LARGE_PODS = 5000  # from this size the peak memory target is the large profile's
PHASES = ("create", "steady", "rollout", "delete")


def dig(summary: Summary, *keys: str) -> Any:
    """``summary[k1][k2]...``, or None where any step is missing."""
    node: Any = summary
    for key in keys:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def request_counts(by_verb: Mapping[str, int] | None) -> dict[str, int] | None:
    """One phase's ``api_requests`` (``{"verb resource[ (code)]": n}``) in the issue's terms:
    ``counted`` (all but Leases), ``leases``, ``certificates``, ``events`` and
    ``status_patches`` (writes of LeaderWorkerSet status)."""
    if by_verb is None:
        return None
    out = {"counted": 0, "leases": 0, "certificates": 0, "events": 0, "status_patches": 0}
    for key, n in by_verb.items():
        verb, _, rest = key.partition(" ")
        resource = rest.split(" ", 1)[0]
        if resource == LEASES:
            out["leases"] += n
            continue
        out["counted"] += n
        if resource in CERTIFICATES:
            out["certificates"] += n
        elif resource == "events":
            out["events"] += n
        elif resource == STATUS and verb in WRITE_VERBS:
            out["status_patches"] += n
    return out


def _requests(phase: str, what: str = "counted") -> Callable[[Summary], float | None]:
    def get(summary: Summary) -> float | None:
        counts = request_counts(dig(summary, "operator", "api_requests", phase))
        return None if counts is None else counts[what]
    return get


def _requests_note(phase: str) -> Callable[[Summary], str]:
    def note(summary: Summary) -> str:
        counts = request_counts(dig(summary, "operator", "api_requests", phase))
        if counts is None:
            return ""
        seconds = dig(summary, "profile", "steady_seconds") if phase == "steady" else None
        window = f"in {seconds:g} s; " if seconds is not None else ""
        return (f"{window}incl. {counts['events']} Events, {counts['certificates']} certificate"
                f"/webhook-configuration; excl. {counts['leases']} Lease")
    return note


def _at(*keys: str) -> Callable[[Summary], float | None]:
    return lambda summary: dig(summary, *keys)


def _raw(summary: Summary, *keys: str) -> Any:
    """The baseline's figure of the create phase."""
    return dig(summary, "baseline", "create", *keys)


def _path(steps: Mapping[str, float] | None) -> str:
    """The steps to the first pod Ready, as "statefulset_created 0.1, pod_created 0.2, ..."."""
    return ", ".join(f"{step} {_number(t)}" for step, t in (steps or {}).items()) or "no steps"


def _cpu_note(phase: str) -> Callable[[Summary], str]:
    """What the operator's side of ``phase`` burnt more (or less) than the baseline's, by
    process, the largest differences first (``cpu_seconds_by_process`` of both sides)."""
    def note(summary: Summary) -> str:
        ours = dig(summary, "operator", phase, "cpu_seconds_by_process") or {}
        raw = dig(summary, "baseline", phase, "cpu_seconds_by_process") or {}
        if not ours or not raw:
            return "no CPU figures by process"
        names = [n for n in ours if n not in ("machine", "steal")]
        diffs = sorted(((ours[n] - raw.get(n, 0.0), n) for n in names),
                       key=lambda d: -abs(d[0]))
        spent = ", ".join(f"{n} {d:+.1f}" for d, n in diffs if abs(d) >= 0.05)
        return (f"machine CPU s {_number(ours.get('machine'))} vs raw "
                f"{_number(raw.get('machine'))}; by process: {spent}; stolen by the "
                f"hypervisor {_number(ours.get('steal'))} vs {_number(raw.get('steal'))}")
    return note


def _floor_note(phase: str, wall_target: float) -> Callable[[Summary], str]:
    """What the floor ratio (``figures.floor_ratio``) says of the phase's wall-ratio target."""
    def note(summary: Summary) -> str:
        floor = dig(summary, "floor_ratios", phase)
        if floor is None:
            return "no CPU figures by process"
        verdict = ("above" if floor > wall_target else "within")
        return (f"a controller costing no CPU, sending the same requests; the operator's "
                f"processes add {_number(_round_diff(summary, phase))}; {verdict} the "
                f"wall-ratio target {wall_target:g}")
    return note


def _round_diff(summary: Summary, phase: str) -> float | None:
    total, floor = (dig(summary, "machine_cpu_ratios", phase),
                    dig(summary, "floor_ratios", phase))
    return None if total is None or floor is None else round(total - floor, 3)


def _large_peak(summary: Summary) -> float | None:
    """The newest large run's peak, shared pages once; its RSS sum, an upper bound of it, for a
    run recorded before that figure was."""
    large = dig(summary, "large_profile")
    if not isinstance(large, Mapping):
        return None
    value = large.get("peak_rss_shared_once")
    return value if value is not None else large.get("peak_rss")


def _large_note(summary: Summary) -> str:
    large = dig(summary, "large_profile")
    if not isinstance(large, Mapping):
        return "no large run in the history"
    how = ("shared pages once" if large.get("peak_rss_shared_once") is not None
           else "RSS sum (recorded before the other figure)")
    return (f"{large.get('run')}: {large.get('pods')} pods; {how}; RSS sum peak "
            f"{_number(large.get('peak_rss'))}, at end {_number(large.get('at_end'))}")


def _at_end(summary: Summary, key: str) -> Any:
    return dig(summary, "operator", "memory_mib", key)


def _upstream_peak(summary: Summary) -> float | None:
    """Upstream's peak, shared pages once: its peak RSS (one process) in a run recorded before
    that figure was."""
    memory = dig(summary, "upstream", "memory_mib")
    if not isinstance(memory, Mapping):
        return None
    value = memory.get("peak_rss_shared_once")
    return value if value is not None else memory.get("peak_rss")


def _rss_limit(summary: Summary) -> float:
    pods = dig(summary, "profile", "pods") or 0
    return 200.0 if pods >= LARGE_PODS else 90.0


@dataclass(frozen=True)
class Figure:
    """One row of the issue's table: ``key`` names it across runs; ``limit`` is its target
    (met when the value is at most the limit; a function of the summary where the target
    depends on the profile); ``upstream`` and ``before`` are the issue's figures."""

    key: str
    phase: str
    metric: str
    value: Callable[[Summary], float | None]
    limit: float | Callable[[Summary], float | None] | None = None
    upstream: str = ""
    before: str = ""
    note: Callable[[Summary], str] | None = None

    def row(self, summary: Summary, previous: Summary | None) -> dict[str, Any]:
        value = self.value(summary)
        limit = self.limit(summary) if callable(self.limit) else self.limit
        met = None if limit is None or value is None else value <= limit
        before = None if previous is None else self.value(previous)
        change = None if value is None or before is None else round(value - before, 4)
        measured = UPSTREAM_MEASURED.get(self.key)
        return {"key": self.key, "phase": self.phase, "metric": self.metric, "value": value,
                "target": limit, "met": met, "upstream": self.upstream or None,
                "upstream_run": None if measured is None else measured(summary),
                "issue_ours": self.before or None, "previous": before, "change": change,
                "note": self.note(summary) if self.note else ""}


def _rate_note(s: Summary, *at: str) -> str:
    """How a webhook run at rate went: dry-run creates or pods stored, the rate reached, and
    the share of kube-apiserver's calls answered within 5 ms as it timed them."""
    dry = dig(s, *at, "dry_run")
    how = ("dry-run creates (admitted, not stored); " if dry
           else "pods stored, scheduled and run; " if dry is False else "")
    return (f"{how}at {dig(s, *at, 'achieved_rate')}/s; kube-apiserver's calls within 5 ms: "
            f"{dig(s, *at, 'apiserver_ms', 'share_within_5ms')}")


FIGURES: tuple[Figure, ...] = (
    Figure("create.wall_s", "create", "wall s", _at("operator", "create", "seconds"),
           upstream="17.1", before="19.2"),
    Figure("create.raw_wall_s", "create", "raw StatefulSets wall s",
           _at("baseline", "create", "seconds"), upstream="11.2", before="11.2"),
    Figure("create.ratio", "create", "wall ratio to raw StatefulSets", _at("ratios", "create"),
           1.25, upstream="1.3-1.5", before="1.71"),
    Figure("create.cpu_s", "create", "controller CPU s",
           _at("operator", "cpu_seconds", "create"), 4.0, upstream="4.0", before="8.5"),
    Figure("create.requests", "create", "API requests", _requests("create"), 480.0,
           upstream="479", before="494", note=_requests_note("create")),
    Figure("create.status_patches", "create", "status patches",
           _requests("create", "status_patches"), 60.0, upstream="~60", before="~147"),
    Figure("create.first_ready_s", "create", "first pod Ready after first create s",
           _at("operator", "create", "first_ready_seconds"), 0.25, upstream="0.2",
           before="0.3-0.6",
           note=lambda s: "driver's clock: create request sent to Ready seen on its watch "
                          f"({_path(dig(s, 'operator', 'create', 'first_ready_path_seconds'))}); "
                          f"raw StatefulSets {_number(_raw(s, 'first_ready_seconds'))} "
                          f"({_path(_raw(s, 'first_ready_path_seconds'))})"),
    Figure("create.median_set_s", "create", "median set done s",
           _at("operator", "create", "per_set_seconds", "p50"), upstream="10-13",
           before="13-16",
           note=lambda s: f"raw StatefulSets {_number(_raw(s, 'per_set_seconds', 'p50'))}"),
    Figure("create.machine_cpu_ratio", "create", "machine CPU ratio to raw StatefulSets",
           _at("machine_cpu_ratios", "create"), note=_cpu_note("create")),
    Figure("create.floor_ratio", "create", "machine CPU ratio without the operator's processes",
           _at("floor_ratios", "create"), note=_floor_note("create", 1.25)),
    Figure("rollout.wall_s", "rollout", "wall s", _at("operator", "rollout", "seconds"),
           upstream="28.9", before="34.3"),
    Figure("rollout.raw_wall_s", "rollout", "raw StatefulSets wall s",
           _at("baseline", "rollout", "seconds"), upstream="16.5", before="16.5"),
    Figure("rollout.ratio", "rollout", "wall ratio to raw StatefulSets",
           _at("ratios", "rollout"), 1.6, upstream="1.75", before="2.08"),
    Figure("rollout.machine_cpu_ratio", "rollout", "machine CPU ratio to raw StatefulSets",
           _at("machine_cpu_ratios", "rollout"), note=_cpu_note("rollout")),
    Figure("rollout.floor_ratio", "rollout", "machine CPU ratio without the operator's processes",
           _at("floor_ratios", "rollout"), note=_floor_note("rollout", 1.6)),
    Figure("rollout.cpu_s", "rollout", "controller CPU s",
           _at("operator", "cpu_seconds", "rollout"), 7.0, upstream="6.7", before="17.2"),
    Figure("rollout.requests", "rollout", "API requests", _requests("rollout"), 760.0,
           upstream="756", before="1088", note=_requests_note("rollout")),
    Figure("rollout.status_patches", "rollout", "status patches",
           _requests("rollout", "status_patches"), 140.0, upstream="~140", before="~480"),
    Figure("delete.cpu_s", "delete", "controller CPU s",
           _at("operator", "cpu_seconds", "delete"), 0.6, upstream="0.6", before="2.1"),
    Figure("delete.ratio", "delete", "wall ratio to raw StatefulSets", _at("ratios", "delete")),
    Figure("delete.requests", "delete", "API requests", _requests("delete"),
           note=_requests_note("delete")),
    Figure("steady.requests", "steady", "API requests besides Leases", _requests("steady"), 0.0,
           upstream="0", before="3-6 per 15 s", note=_requests_note("steady")),
    Figure("steady.lease_requests", "steady", "Lease requests (leader election)",
           _requests("steady", "leases"), upstream="(election off)"),
    Figure("steady.cpu_s", "steady", "controller CPU s",
           _at("operator", "cpu_seconds", "steady")),
    Figure("run.peak_shared_once_mib", "whole run", "peak MiB, shared pages once",
           _at("operator", "memory_mib", "peak_rss_shared_once"), _rss_limit, upstream="85",
           note=lambda s: "the target's figure: the operator's RSS + its admission child's "
                          "USS, each page once, as the pod's memory cgroup charges it (a "
                          "limit, kubectl top); target 90 (default profile), 200 at 5,000 "
                          "pods"),
    Figure("run.peak_rss_mib", "whole run", "peak RSS MiB, processes added",
           _at("operator", "memory_mib", "peak_rss"), upstream="85", before="141",
           note=lambda s: "both processes' RSS added: the pages they share (interpreter, "
                          "libraries, what the forked child inherited) counted twice; at the "
                          f"end operator {_number(_at_end(s, 'operator_rss_at_end'))}, child "
                          f"{_number(_at_end(s, 'admission_rss_at_end'))}"),
    Figure("large.peak_mib", "5,000 pods", "peak MiB, newest large run",
           _large_peak, 200.0, note=_large_note),
    Figure("run.start_shared_once_mib", "whole run", "at start MiB, shared pages once",
           _at("operator", "memory_mib", "at_start_shared_once"), upstream="51"),
    Figure("run.start_rss_mib", "whole run", "RSS at start MiB, processes added",
           _at("operator", "memory_mib", "at_start"), upstream="51", before="91"),
    Figure("load.webhook_apiserver_mean_ms", "under load",
           "pod webhook mean ms seen by kube-apiserver",
           _at("operator", "apiserver_pod_webhook_call_ms", "mean"), upstream="43-58",
           before="68-107", note=lambda s: "during the benchmark; network and TLS included"),
    Figure("load.webhook_server_mean_ms", "under load", "pod webhook mean ms, server side",
           _at("operator", "pod_webhook_ms", "mean"),
           note=lambda s: f"during the benchmark; p99 "
                          f"{_number(dig(s, 'operator', 'pod_webhook_ms', 'p99'))} (bucket "
                          "estimate)"),
    Figure("rate.webhook_server_p99_ms", "200/s", "pod webhook p99 ms, server side",
           _at("webhook_at_rate", "server_ms", "p99"), 5.0, before="5.6",
           note=lambda s: _rate_note(s, "webhook_at_rate")),
    Figure("rate.webhook_server_p99_stored_ms", "200/s, pods stored",
           "pod webhook p99 ms, server side, pods stored and run",
           _at("webhook_at_rate", "stored", "server_ms", "p99"),
           note=lambda s: _rate_note(s, "webhook_at_rate", "stored")),
    Figure("rate.webhook_connections_per_admission", "200/s",
           "webhook TLS connections per admission",
           _at("webhook_at_rate", "connections", "per_admission"),
           note=lambda s: f"{dig(s, 'webhook_at_rate', 'connections', 'accepted')} connections, "
                          f"{dig(s, 'webhook_at_rate', 'connections', 'admissions')} admissions; "
                          "kube-apiserver keeps 25 idle per host"),
    Figure("rate.admission_child_cpu_ms", "200/s", "admission process CPU ms per admission",
           _at("webhook_at_rate", "connections", "child_cpu_ms_per_admission")),
    Figure("create.writes_per_set", "create", "writes per set besides status, Events, Leases",
           _at("operator", "writes_on_create", "per_set"),
           note=lambda s: "the old target was 2 + replicas"),
)


def _upstream_requests(phase: str, what: str = "counted") -> Callable[[Summary], Any]:
    return _at("upstream", "api_requests_counted", phase, what)


# Upstream's figure measured in the same run for a row of ``FIGURES`` (the ``upstream`` column
# holds the issue's, a reference for the default profile only).
UPSTREAM_MEASURED: dict[str, Callable[[Summary], Any]] = {
    "create.wall_s": _at("upstream", "create", "seconds"),
    "create.ratio": _at("upstream_ratios", "create"),
    "create.cpu_s": _at("upstream", "cpu_seconds", "create"),
    "create.requests": _upstream_requests("create"),
    "create.status_patches": _upstream_requests("create", "status_patches"),
    "create.first_ready_s": _at("upstream", "create", "first_ready_seconds"),
    "create.median_set_s": _at("upstream", "create", "per_set_seconds", "p50"),
    "create.machine_cpu_ratio": _at("upstream_machine_cpu_ratios", "create"),
    "create.floor_ratio": _at("upstream_floor_ratios", "create"),
    "rollout.wall_s": _at("upstream", "rollout", "seconds"),
    "rollout.ratio": _at("upstream_ratios", "rollout"),
    "rollout.machine_cpu_ratio": _at("upstream_machine_cpu_ratios", "rollout"),
    "rollout.floor_ratio": _at("upstream_floor_ratios", "rollout"),
    "rollout.cpu_s": _at("upstream", "cpu_seconds", "rollout"),
    "rollout.requests": _upstream_requests("rollout"),
    "rollout.status_patches": _upstream_requests("rollout", "status_patches"),
    "delete.cpu_s": _at("upstream", "cpu_seconds", "delete"),
    "delete.ratio": _at("upstream_ratios", "delete"),
    "delete.requests": _upstream_requests("delete"),
    "steady.requests": _upstream_requests("steady"),
    "steady.cpu_s": _at("upstream", "cpu_seconds", "steady"),
    "run.peak_shared_once_mib": _upstream_peak,
    "run.peak_rss_mib": _at("upstream", "memory_mib", "peak_rss"),
    "run.start_shared_once_mib": _at("upstream", "memory_mib", "at_start"),
    "run.start_rss_mib": _at("upstream", "memory_mib", "at_start"),
}


# ---------------------------------------------------------------------------- issue 44: ours
# against the upstream controller measured in the same run


def _large(summary: Summary) -> bool:
    return bool((dig(summary, "profile", "pods") or 0) >= LARGE_PODS)


# Issue 44's wall-time targets on the default profile, ours / upstream.
DEFAULT_WALL_TARGETS = {"create": 0.85, "rollout": 0.9}


def _wall_limit(default: float) -> Callable[[Summary], float]:
    """Issue 44's wall-time targets: ``default`` on the default profile, 0.8 from 5,000 pods."""
    return lambda summary: 0.8 if _large(summary) else default


def _at_large(limit: float) -> Callable[[Summary], float | None]:
    """A target that holds from 5,000 pods only (reported without one below)."""
    return lambda summary: limit if _large(summary) else None


Path_ = tuple[str, ...]


def _versus_note(ours: Path_, theirs: Path_, raw: Path_ | None = None
                 ) -> Callable[[Summary], str]:
    def note(summary: Summary) -> str:
        if not isinstance(summary.get("upstream"), Mapping):
            return "no upstream side in this run"
        text = (f"median of the rounds' ratios; ours {_number(dig(summary, *ours))} vs "
                f"upstream {_number(dig(summary, *theirs))}")
        return text + (f", raw StatefulSets {_number(dig(summary, *raw))}" if raw else "")
    return note


def _peak_ratio(ours_key: str, theirs: Callable[[Summary], Any]
                ) -> Callable[[Summary], float | None]:
    """Ours over upstream's peak memory, each the worst of the rounds."""
    def ratio(summary: Summary) -> float | None:
        ours = dig(summary, "operator", "memory_mib", ours_key)
        upstream = theirs(summary)
        if not isinstance(ours, (int, float)) or not isinstance(upstream, (int, float)) \
                or not upstream:
            return None
        return round(ours / upstream, 3)
    return ratio


def _per_pod_limit(key: str) -> Callable[[Summary], float | None]:
    """Cost per pod must not grow: from 5,000 pods, the newest default-profile run's figure."""
    return lambda summary: (dig(summary, "default_profile", "per_pod", key)
                            if _large(summary) else None)


def _per_pod_note(key: str) -> Callable[[Summary], str]:
    def note(summary: Summary) -> str:
        default = dig(summary, "default_profile")
        return (f"upstream {_number(dig(summary, 'per_pod', 'upstream', key))}; newest default "
                f"run ({dig(summary, 'default_profile', 'run') or 'none'}) "
                f"{_number(dig(default, 'per_pod', key)) if default else '-'}")
    return note


def _bound_note(phase: str) -> Callable[[Summary], str]:
    """How the phase's wall target compares with ``compare.zero_cpu_bound``."""
    limit = _wall_limit(DEFAULT_WALL_TARGETS[phase])

    def note(summary: Summary) -> str:
        bound = dig(summary, "vs_upstream", f"{phase}.zero_cpu_bound")
        if bound is None:
            return "no CPU figures by process, or no upstream side"
        target = limit(summary)
        verdict = "under the bound: out of reach" if target < bound else "within reach"
        return (f"median of the rounds; our side's machine CPU less the operator's processes "
                f"over upstream's side's; the wall target {target:g} is {verdict}")
    return note


def _vs(key: str, metric: str, phase: str, paths: tuple[Path_, Path_],
        limit: float | Callable[[Summary], float | None] | None = None,
        raw: Path_ | None = None) -> Figure:
    return Figure(f"up.{key}", phase, metric, _at("vs_upstream", key), limit,
                  note=_versus_note(*paths, raw))


def _both(*keys: str) -> tuple[Path_, Path_]:
    """The same figure of ours and of upstream's."""
    return (("operator", *keys), ("upstream", *keys))


VERSUS_UPSTREAM: tuple[Figure, ...] = (
    _vs("create.seconds", "wall, ours / upstream", "create", _both("create", "seconds"),
        _wall_limit(DEFAULT_WALL_TARGETS["create"]), ("baseline", "create", "seconds")),
    _vs("rollout.seconds", "wall, ours / upstream", "rollout", _both("rollout", "seconds"),
        _wall_limit(DEFAULT_WALL_TARGETS["rollout"]), ("baseline", "rollout", "seconds")),
    *(Figure(f"up.{phase}.zero_cpu_bound", phase, "wall bound of a controller costing no CPU, "
             "ours / upstream", _at("vs_upstream", f"{phase}.zero_cpu_bound"),
             note=_bound_note(phase)) for phase in ("create", "rollout")),
    _vs("delete.seconds", "wall, ours / upstream", "delete", _both("delete", "seconds"),
        raw=("baseline", "delete", "seconds")),
    _vs("first_ready_s", "first pod Ready, ours / upstream", "create",
        _both("create", "first_ready_seconds"), 1.0,
        ("baseline", "create", "first_ready_seconds")),
    Figure("up.peak_shared_once_mib", "whole run", "peak memory, ours / upstream",
           _peak_ratio("peak_rss_shared_once", _upstream_peak), 1.0,
           note=lambda s: "shared pages once (what a memory limit sees), the worst round of "
                          "each; ours "
                          f"{_number(dig(s, 'operator', 'memory_mib', 'peak_rss_shared_once'))}"
                          f" MiB (admission child included) vs upstream "
                          f"{_number(_upstream_peak(s))} MiB (one process)"),
    Figure("up.peak_rss_mib", "whole run", "peak RSS summed, ours / upstream",
           _peak_ratio("peak_rss", _at("upstream", "memory_mib", "peak_rss")),
           note=lambda s: "processes' RSS added (shared pages twice); ours "
                          f"{_number(dig(s, 'operator', 'memory_mib', 'peak_rss'))} MiB vs "
                          "upstream "
                          f"{_number(dig(s, 'upstream', 'memory_mib', 'peak_rss'))} MiB"),
    *(_vs(f"{phase}.cpu_s", "controller CPU, ours / upstream", phase,
          _both("cpu_seconds", phase)) for phase in ("create", "rollout", "delete")),
    _vs("create.requests", "API requests, ours / upstream", "create",
        _both("api_requests_counted", "create", "counted")),
    _vs("rollout.requests", "API requests, ours / upstream", "rollout",
        _both("api_requests_counted", "rollout", "counted"), _at_large(1.0)),
    *(_vs(f"{phase}.status_patches", "status patches, ours / upstream", phase,
          _both("api_requests_counted", phase, "status_patches"))
      for phase in ("create", "rollout")),
    Figure("up.work_queue_wait_p99_s", "whole run", "work-queue wait p99 s (ours)",
           _at("operator", "work_queue_wait_seconds", "p99"), _at_large(1.0),
           note=lambda s: "upstream "
                          f"{_number(dig(s, 'upstream', 'work_queue_wait_seconds', 'p99'))}; "
                          "bucket estimates; target at 5,000 pods"),
    *(Figure(f"cost.{key}", key.split(".")[0], f"{key.split('.')[1]} per pod (ours)",
             _at("per_pod", "ours", key), _per_pod_limit(key), note=_per_pod_note(key))
      for key in ("create.requests", "rollout.requests", "create.status_patches",
                  "rollout.status_patches", "create.cpu_ms", "rollout.cpu_ms")),
)


# Every row of the printed table, in its order.
ALL_FIGURES: tuple[Figure, ...] = (*FIGURES, *VERSUS_UPSTREAM)


def table(summary: Summary, previous: Summary | None = None) -> list[dict[str, Any]]:
    """Every figure of the issue's table for ``summary``, compared with ``previous``: the
    performance issue's rows, then issue 44's (ours against upstream, cost per pod)."""
    return [figure.row(summary, previous) for figure in ALL_FIGURES]


# ---------------------------------------------------------------------------- history


def same_profile(a: Summary, b: Summary) -> bool:
    """Runs of the same size (sets, replicas, size, steady window) compare; others do not."""
    keys = ("sets", "replicas", "size", "steady_seconds")
    return all(dig(a, "profile", k) == dig(b, "profile", k) for k in keys)


def runs(history: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The summaries in ``history``, newest first (files named by their UTC stamp, so their
    names sort by time): each file's name and contents; unreadable files are skipped."""
    if not history.is_dir():
        return
    for path in sorted(history.glob("*.json"), reverse=True):
        try:
            earlier = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(earlier, Mapping):
            yield path.name, earlier


def previous_run(history: Path, summary: Summary) -> tuple[str, Summary] | None:
    """The newest summary in ``history`` of a run the same size as ``summary``: its file name
    and contents."""
    return next(((name, earlier) for name, earlier in runs(history)
                 if same_profile(earlier, summary)), None)


def newest_default_run(history: Path) -> tuple[str, Summary] | None:
    """The newest default-profile run in ``history`` with the operator's figures: the cost per
    pod a large run's must not exceed. By its size (sets, replicas, size) too, not by its name
    alone: a run with other counts (``--sets 1 --replicas 1 --size 2``, the first pod of a
    single apply) keeps the name of the profile it started from."""
    default = PROFILES["default"]
    return next(((name, earlier) for name, earlier in runs(history)
                 if dig(earlier, "profile", "name") == default.name
                 and all(dig(earlier, "profile", k) == getattr(default, k)
                        for k in ("sets", "replicas", "size"))
                 and isinstance(dig(earlier, "operator", "cpu_seconds"), Mapping)), None)


def newest_large_run(history: Path) -> dict[str, Any] | None:
    """The memory figures of the newest run in ``history`` of at least ``LARGE_PODS`` pods (the
    ``large`` profile, run on its own: an hour and more on the 2-core machine), so every
    summary carries the issue's 5,000-pod figure next to its own: the run's file name, size and
    memory (``memory_mib``'s peaks, start and end)."""
    for name, earlier in runs(history):
        pods = dig(earlier, "profile", "pods") or 0
        memory = dig(earlier, "operator", "memory_mib")
        if pods >= LARGE_PODS and isinstance(memory, Mapping):
            return {"run": name, "when": earlier.get("when"), "pods": pods,
                    "peak_rss": memory.get("peak_rss"), "at_start": memory.get("at_start"),
                    "at_end": memory.get("at_end"),
                    "peak_rss_shared_once": memory.get("peak_rss_shared_once")}
    return None


# ---------------------------------------------------------------------------- text


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 10_000 else f"{value:.0f}"
    return str(value)


def _change(row: Mapping[str, Any]) -> str:
    change, previous = row["change"], row["previous"]
    if change is None:
        return ""
    text = f"{change:+.3g}" if change else "0"
    if previous:
        text += f" ({change / previous:+.0%})"
    return text


def render(rows: Iterable[Mapping[str, Any]], previous_name: str | None) -> str:
    """The table as aligned text: the run's figures, targets, upstream's and ours from the
    issue, and the change since the previous run of the same size."""
    head = ("phase", "metric", "value", "target", "met", "upstream now", "upstream (issue)",
            "issue: ours", f"vs {previous_name or 'no previous run'}", "")
    lines = [head]
    for row in rows:
        met = {True: "yes", False: "NO", None: "" if row["target"] is None else "?"}[row["met"]]
        target = "" if row["target"] is None else f"<= {_number(row['target'])}"
        measured = row.get("upstream_run")
        lines.append((row["phase"], row["metric"], _number(row["value"]), target, met,
                      "" if measured is None else _number(measured), row["upstream"] or "",
                      row["issue_ours"] or "", _change(row), row["note"]))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    return "\n".join("  ".join([*(cell.ljust(w) for cell, w in zip(line, widths, strict=False)),
                                line[-1]]).rstrip() for line in lines)
