"""The scale benchmark's arithmetic: Prometheus scrapes in, report figures out. Pure functions.

Counters are compared between two scrapes (``delta``), never read as totals, so figures belong
to one phase. Histogram quantiles are estimated the way Prometheus' ``histogram_quantile`` does
(linear inside the bucket), which is as precise as the buckets; where a target is a bucket
boundary (webhook p99 <= 5 ms) the share within the bound is reported exactly as well.
"""

from __future__ import annotations

import bisect
import html
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Parsing a scrape is the harness's (tests read the operator's metrics the same way).
from e2e.bench.targets import dig
from e2e.harness.metrics import WRITE_VERBS as WRITE_VERBS
from e2e.harness.metrics import Labels as Labels
from e2e.harness.metrics import Scrape as Scrape
from e2e.harness.metrics import parse as parse
from e2e.harness.metrics import select as select
from e2e.harness.metrics import total as total

# kube-apiserver's verb label for each of our client's verbs.
APISERVER_VERB = {"create": "POST", "update": "PUT", "patch": "PATCH", "apply": "APPLY",
                  "delete": "DELETE", "deletecollection": "DELETECOLLECTION", "get": "GET",
                  "list": "LIST", "watch": "WATCH"}

# Requests only the operator issues while its phase runs (the driver only creates, patches and
# deletes LeaderWorkerSets; kube-controller-manager writes pods, StatefulSet status,
# ControllerRevisions of StatefulSets and Events), so kube-apiserver's count of them must equal
# the operator's own.
OPERATOR_ONLY = (("apply", "statefulsets"), ("create", "statefulsets"), ("create", "services"),
                 ("patch", "leaderworkersets/status"))

def delta(after: Scrape, before: Scrape) -> Scrape:
    """What the counters (and histogram buckets) of ``after`` gained since ``before``."""
    return {key: value - before.get(key, 0.0) for key, value in after.items()}


def by_labels(scrape: Scrape, metric: str, keys: Iterable[str], /, **match: str,
              ) -> dict[tuple[str, ...], float]:
    """``name`` summed by the label values ``keys``; zero entries dropped."""
    keys = tuple(keys)
    out: dict[tuple[str, ...], float] = {}
    for labels, value in select(scrape, metric, **match).items():
        key = tuple(dict(labels).get(k, "") for k in keys)
        out[key] = out.get(key, 0.0) + value
    return {k: v for k, v in out.items() if v}


def requests_by_verb(scrape: Scrape) -> dict[str, int]:
    """The operator's API requests of one phase as ``{"verb resource": count}``, sorted; those
    that failed are counted apart, as ``"verb resource (code)"``."""
    counts = by_labels(scrape, "lws_operator_api_requests_total", ("verb", "resource", "code"))
    out: dict[str, int] = {}
    for (verb, resource, code), n in sorted(counts.items()):
        key = f"{verb} {resource or '(non-resource)'}"
        if not code.startswith("2"):
            key += f" ({code})"
        out[key] = out.get(key, 0) + int(n)
    return out


def writes(scrape: Scrape, *, exclude: Iterable[str] = ()) -> int:
    """The operator's write requests of one phase, leaving out the resources in ``exclude``."""
    skip = set(exclude)
    counts = by_labels(scrape, "lws_operator_api_requests_total", ("verb", "resource"))
    return int(sum(n for (verb, resource), n in counts.items()
                   if verb in WRITE_VERBS and resource not in skip))


def apiserver_count(scrape: Scrape, verb: str, resource: str) -> int:
    """kube-apiserver's ``apiserver_request_total`` for one of our client's (verb, resource)."""
    name, _, sub = resource.partition("/")
    return int(total(scrape, "apiserver_request_total", verb=APISERVER_VERB[verb],
                     resource=name, subresource=sub))


def cross_check(operator: Scrape, apiserver: Scrape) -> dict[str, dict[str, int]]:
    """For each request only the operator makes: its own count and the API server's."""
    counts = by_labels(operator, "lws_operator_api_requests_total", ("verb", "resource"))
    return {f"{verb} {resource}": {"operator": int(counts.get((verb, resource), 0)),
                                   "apiserver": apiserver_count(apiserver, verb, resource)}
            for verb, resource in OPERATOR_ONLY}


def buckets(scrape: Scrape, metric: str, /, **match: str) -> dict[float, float]:
    """A histogram's cumulative buckets (upper bound -> count), summed over other labels."""
    out: dict[float, float] = {}
    for labels, value in select(scrape, metric + "_bucket", **match).items():
        le = dict(labels)["le"]
        bound = math.inf if le == "+Inf" else float(le)
        out[bound] = out.get(bound, 0.0) + value
    return dict(sorted(out.items()))


def quantile(q: float, cumulative: Mapping[float, float]) -> float | None:
    """Prometheus' ``histogram_quantile``: None without observations; the highest finite
    bound when the quantile falls in the +Inf bucket."""
    bounds = sorted(cumulative)
    if not bounds or cumulative[bounds[-1]] <= 0:
        return None
    rank = q * cumulative[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = cumulative[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def mean(scrape: Scrape, metric: str, /, unit: float = 1.0, **match: str) -> float | None:
    """A histogram's mean (``_sum`` over ``_count``) in ``unit``s; None without observations."""
    count = total(scrape, metric + "_count", **match)
    if count <= 0:
        return None
    return round(total(scrape, metric + "_sum", **match) / count / unit, 4)


def share_within(bound: float, cumulative: Mapping[float, float]) -> float | None:
    """The share of observations at most ``bound`` (which must be a bucket boundary)."""
    count = cumulative.get(math.inf, 0.0)
    if count <= 0 or bound not in cumulative:
        return None
    return round(cumulative[bound] / count, 4)


def histogram_summary(cumulative: Mapping[float, float], unit: float = 1.0) -> dict[str, object]:
    """Count, p50/p90/p99 estimates (in ``unit``s) and the non-empty buckets."""
    count = cumulative.get(math.inf, 0.0)
    summary: dict[str, object] = {"count": int(count)}
    for q in (0.5, 0.9, 0.99):
        value = quantile(q, cumulative)
        summary[f"p{round(q * 100)}"] = None if value is None else round(value / unit, 4)
    previous, nonempty = 0.0, {}
    for bound, value in sorted(cumulative.items()):
        if value > previous:
            nonempty["+Inf" if math.isinf(bound) else f"{bound / unit:g}"] = int(value - previous)
        previous = value
    summary["buckets"] = nonempty
    return summary


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50 and max of a sample (seconds, rounded to ms)."""
    if not values:
        return {"p50": None, "max": None}
    return {"p50": round(statistics.median(values), 3), "max": round(max(values), 3)}


def ratio(operator: float | None, baseline: float | None) -> float | None:
    if operator is None or not baseline:
        return None
    return round(operator / baseline, 3)


# The processes that are the controller itself, in a side's ``cpu_seconds_by_process``: ours
# (the operator, its admission child, py-spy recording them) or the upstream controller.
OPERATOR_PROCESSES = ("operator", "admission_child", "py-spy", "upstream")


def floor_ratio(ours: Mapping[str, float] | None, raw: Mapping[str, float] | None
                ) -> float | None:
    """The machine CPU ratio of a phase with the operator's own processes left out of its side:
    what a controller that cost no CPU at all, sending the same requests, would bring the
    phase to. On this 2-core machine a phase's wall ratio follows its machine CPU ratio, so
    this is the lowest wall ratio the controller's own work can reach; the rest is the
    control plane serving the API's objects (the LeaderWorkerSets, their revisions, Events,
    status, the pod webhook, worker StatefulSets owned by leader pods). None without CPU
    figures."""
    if not ours or not raw or ours.get("machine") is None:
        return None
    own = sum(ours.get(name, 0.0) for name in OPERATOR_PROCESSES)
    return ratio(ours["machine"] - own, raw.get("machine"))


# One frame of an inferno flame graph (py-spy's ``--format flamegraph``): its title, the row it
# is drawn in, and ``fg:x``/``fg:w``, its first sample and its width in samples.
_SVG_FRAME = re.compile(r'<g><title>(?P<title>[^<]*)</title><rect [^>]*?y="(?P<y>[0-9.]+)"'
                        r'[^>]*?fg:x="(?P<x>[0-9]+)" fg:w="(?P<w>[0-9]+)"')
_SAMPLES = re.compile(r" \([0-9,]+ samples?, [0-9.]+%\)$")


# ---------------------------------------------------------------------------- repeated runs

# Where a repeated run reports its worst round, not the median: a target that must hold every
# time (nothing written at rest, a clean exit) or a peak (memory).
WORST_OF = frozenset({"memory_mib", "steady_state", "exit_code"})


def middle_round(summaries: Sequence[Mapping[str, Any]]) -> int:
    """The index of the round whose rollout ratio is the median (the lower one of an even
    count): its timelines, plot and flame graphs stand for the run."""
    ratios = [(s.get("ratios") or {}).get("rollout") for s in summaries]
    known = sorted((r, i) for i, r in enumerate(ratios) if isinstance(r, (int, float)))
    return known[(len(known) - 1) // 2][1] if known else 0


def combine_rounds(summaries: list[dict[str, Any]], middle: int) -> dict[str, Any]:
    """One summary for the rounds of a repeated run: every number the median over the rounds
    (the worst for ``WORST_OF``), everything else (texts, lists, file names) the middle
    round's; ``rounds`` keeps each round's main figures. Run-to-run noise on this machine is
    larger than most gaps to the targets (rollout ratios of 1.35 to 2.33 on one day), so a
    single round cannot tell whether a change moved a ratio."""
    if len(summaries) == 1:
        return summaries[0]
    ordered = [summaries[middle], *(s for i, s in enumerate(summaries) if i != middle)]
    combined = _combine(ordered, worst=False)
    combined["rounds"] = [round_figures(s) for s in summaries]
    combined["middle_round"] = middle + 1
    return combined


def _combine(values: list[Any], worst: bool) -> Any:
    first = values[0]
    if isinstance(first, Mapping):
        keys = dict.fromkeys(k for v in values if isinstance(v, Mapping) for k in v)
        return {k: _combine([v[k] for v in values if isinstance(v, Mapping) and k in v],
                            worst or k in WORST_OF) for k in keys}
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if isinstance(first, bool) or len(numbers) != len(values):
        return first
    if worst:
        return max(numbers, key=abs)
    if all(isinstance(v, int) for v in numbers):
        return statistics.median_low(numbers)
    return round(statistics.median(numbers), 4)


def round_figures(summary: Mapping[str, Any]) -> dict[str, Any]:
    """One round's main figures, for the summary's ``rounds``."""
    timed = ("create", "rollout", "delete")
    return {
        "ratios": summary.get("ratios"),
        "seconds": {phase: dig(summary, "operator", phase, "seconds") for phase in timed},
        "raw_seconds": {phase: dig(summary, "baseline", phase, "seconds") for phase in timed},
        "machine_cpu_ratios": summary.get("machine_cpu_ratios"),
        "floor_ratios": summary.get("floor_ratios"),
        "first_ready_seconds": dig(summary, "operator", "create", "first_ready_seconds"),
        "raw_first_ready_seconds": dig(summary, "baseline", "create", "first_ready_seconds"),
        "cpu_seconds": dig(summary, "operator", "cpu_seconds"),
        "peak_rss_mib": dig(summary, "operator", "memory_mib", "peak_rss"),
        "peak_shared_once_mib": dig(summary, "operator", "memory_mib", "peak_rss_shared_once"),
        "webhook_p99_ms": dig(summary, "webhook_at_rate", "server_ms", "p99"),
        "webhook_rate": dig(summary, "webhook_at_rate", "achieved_rate"),
        "webhook_p99_stored_ms": dig(summary, "webhook_at_rate", "stored", "server_ms", "p99"),
        "webhook_rate_stored": dig(summary, "webhook_at_rate", "stored", "achieved_rate"),
    } | ({} if not isinstance(summary.get("upstream"), Mapping) else {
        "upstream_seconds": {phase: dig(summary, "upstream", phase, "seconds")
                             for phase in timed},
        "upstream_ratios": summary.get("upstream_ratios"),
        "upstream_first_ready_seconds": dig(summary, "upstream", "create",
                                            "first_ready_seconds"),
        "upstream_cpu_seconds": dig(summary, "upstream", "cpu_seconds"),
        "upstream_peak_rss_mib": dig(summary, "upstream", "memory_mib", "peak_rss"),
        "upstream_peak_shared_once_mib": dig(summary, "upstream", "memory_mib",
                                             "peak_rss_shared_once"),
        "vs_upstream": summary.get("vs_upstream"),
    })


def collapsed_from_flamegraph(svg: str) -> str:
    """A flame graph's stacks back as collapsed lines (``a;b;c count``), for ``top_frames``.

    Each frame's parent is the frame one row nearer the root (``all``) whose sample range holds
    its first sample; a frame's own samples are its width less its children's. Frames inferno
    left out for being narrower than a pixel's tenth count as their parent's own time."""
    frames: list[tuple[float, int, int, str]] = []
    for match in _SVG_FRAME.finditer(svg):
        title = _SAMPLES.sub("", html.unescape(match["title"]))
        frames.append((float(match["y"]), int(match["x"]), int(match["w"]), title))
    roots = [f for f in frames if f[3] == "all"]
    if not roots:
        return ""
    rows = sorted({f[0] for f in frames}, reverse=roots[0][0] != min(f[0] for f in frames))
    depth = {y: i for i, y in enumerate(rows)}
    levels: list[list[tuple[int, int, str]]] = [[] for _ in rows]
    for y, x, w, title in frames:
        levels[depth[y]].append((x, w, title))
    for level in levels:
        level.sort()
    paths: list[dict[int, str]] = [{x: "" for x, _, _ in levels[0]}]
    own: dict[str, int] = {}
    children: list[dict[int, int]] = [{} for _ in rows]
    for d in range(1, len(levels)):
        parents = levels[d - 1]
        starts = [x for x, _, _ in parents]
        paths.append({})
        for x, w, title in levels[d]:
            px = starts[bisect.bisect_right(starts, x) - 1]
            parent = paths[d - 1][px]
            paths[d][x] = f"{parent};{title}" if parent else title
            children[d - 1][px] = children[d - 1].get(px, 0) + w
    for d, level in enumerate(levels[1:], start=1):
        for x, w, _ in level:
            left = w - children[d].get(x, 0)
            if left > 0:
                own[paths[d][x]] = own.get(paths[d][x], 0) + left
    return "".join(f"{stack} {n}\n" for stack, n in own.items())


def top_frames(collapsed: str, *, own: str = "lws_operator", limit: int = 15,
               ) -> dict[str, object]:
    """The hotspots of collapsed stacks (py-spy's ``--format raw``, or
    ``collapsed_from_flamegraph``): the share of samples each function
    is running in (``self``), and the share spent inside each of our own functions, callees
    included (``inclusive``, only frames from the ``own`` package)."""
    self_counts: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    samples = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        samples += count
        frames = [_frame(f) for f in stack.split(";")]
        self_counts[frames[-1]] = self_counts.get(frames[-1], 0) + count
        for frame in set(frames):
            if own in frame:
                inclusive[frame] = inclusive.get(frame, 0) + count
    if not samples:
        return {"samples": 0, "self": [], "inclusive": []}

    def ranked(counts: dict[str, int]) -> list[tuple[str, float]]:
        best = sorted(counts.items(), key=lambda kv: -kv[1])[:limit]
        return [(frame, round(n / samples, 4)) for frame, n in best]

    return {"samples": samples, "self": ranked(self_counts),
            "inclusive": ranked(inclusive)}


def _frame(frame: str) -> str:
    """``reconcile (lws_operator/controllers/x.py:120)`` without the line number, and with the
    path cut to where the package starts."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for anchor in ("site-packages/", "lws_operator/", "python3.11/"):
        if anchor in path:
            path = (anchor if anchor == "lws_operator/" else "") + path.split(anchor, 1)[1]
            break
    return f"{name} ({path})" if path else name
