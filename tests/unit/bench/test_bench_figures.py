"""The scale benchmark's arithmetic: scrapes, deltas, quantiles, cross-checks, hotspots, flame
graphs read back as stacks."""

from __future__ import annotations

import math

import pytest

from e2e.bench import figures

OPERATOR = """\
# TYPE lws_operator_api_requests_total counter
lws_operator_api_requests_total{verb="create",resource="statefulsets",code="201"} 12
lws_operator_api_requests_total{verb="apply",resource="statefulsets",code="200"} 4
lws_operator_api_requests_total{verb="patch",resource="leaderworkersets/status",code="200"} 9
lws_operator_api_requests_total{verb="patch",resource="leaderworkersets/status",code="409"} 1
lws_operator_api_requests_total{verb="create",resource="events",code="201"} 7
lws_operator_api_requests_total{verb="get",resource="secrets",code="200"} 3
lws_operator_api_requests_total{verb="get",resource="",code="200"} 2
# TYPE h histogram
h_bucket{le="0.005"} 90
h_bucket{le="0.01"} 99
h_bucket{le="+Inf"} 100
h_count 100
h_sum 0.4
"""

APISERVER = """\
# TYPE apiserver_request_total counter
apiserver_request_total{verb="POST",resource="statefulsets",subresource="",code="201"} 12
apiserver_request_total{verb="APPLY",resource="statefulsets",subresource="",code="200"} 4
apiserver_request_total{verb="PUT",resource="statefulsets",subresource="status",code="200"} 50
apiserver_request_total{verb="PATCH",resource="leaderworkersets",subresource="status",code="200"} 9
apiserver_request_total{verb="PATCH",resource="leaderworkersets",subresource="status",code="409"} 1
"""


def test_parse_and_delta_keep_labels_apart() -> None:
    before = figures.parse(OPERATOR)
    after = figures.parse(OPERATOR.replace("} 12", "} 15"))
    gained = figures.delta(after, before)
    assert figures.total(gained, "lws_operator_api_requests_total", verb="create",
                         resource="statefulsets") == 3
    assert figures.total(gained, "lws_operator_api_requests_total") == 3


def test_requests_by_verb_keeps_failures_apart_and_names_non_resource_paths() -> None:
    assert figures.requests_by_verb(figures.parse(OPERATOR)) == {
        "apply statefulsets": 4, "create events": 7, "create statefulsets": 12,
        "get (non-resource)": 2, "get secrets": 3, "patch leaderworkersets/status": 9,
        "patch leaderworkersets/status (409)": 1}


@pytest.mark.parametrize(("exclude", "expected"), [
    ((), 33),
    (("events",), 26),
    (("events", "leaderworkersets/status"), 16),
])
def test_writes_leave_out_reads_and_excluded_resources(exclude: tuple[str, ...],
                                                       expected: int) -> None:
    assert figures.writes(figures.parse(OPERATOR), exclude=exclude) == expected


def test_cross_check_maps_verbs_and_subresources_to_the_apiservers_labels() -> None:
    checked = figures.cross_check(figures.parse(OPERATOR), figures.parse(APISERVER))
    assert checked == {
        "apply statefulsets": {"operator": 4, "apiserver": 4},
        "create statefulsets": {"operator": 12, "apiserver": 12},
        "create services": {"operator": 0, "apiserver": 0},
        "patch leaderworkersets/status": {"operator": 10, "apiserver": 10},
    }


@pytest.mark.parametrize(("q", "cumulative", "expected"), [
    (0.5, {0.005: 90.0, 0.01: 99.0, math.inf: 100.0}, 0.005 * 50 / 90),
    (0.9, {0.005: 90.0, 0.01: 99.0, math.inf: 100.0}, 0.005),
    (0.95, {0.005: 90.0, 0.01: 99.0, math.inf: 100.0}, 0.005 + 0.005 * 5 / 9),
    (0.995, {0.005: 90.0, 0.01: 99.0, math.inf: 100.0}, 0.01),  # in +Inf: highest bound
    (0.5, {0.005: 0.0, math.inf: 0.0}, None),  # no observations
    (0.5, {}, None),
])
def test_quantile_interpolates_like_prometheus(q: float, cumulative: dict[float, float],
                                               expected: float | None) -> None:
    value = figures.quantile(q, cumulative)
    assert value == pytest.approx(expected) if expected is not None else value is None


def test_histogram_summary_and_share_within_a_bound() -> None:
    cumulative = figures.buckets(figures.parse(OPERATOR), "h")
    assert cumulative == {0.005: 90.0, 0.01: 99.0, math.inf: 100.0}
    summary = figures.histogram_summary(cumulative, unit=0.001)
    assert summary["count"] == 100
    assert summary["buckets"] == {"5": 90, "10": 9, "+Inf": 1}
    assert figures.share_within(0.005, cumulative) == 0.9
    assert figures.share_within(0.004, cumulative) is None  # not a bucket boundary


@pytest.mark.parametrize(("operator", "baseline", "expected"), [
    (11.0, 10.0, 1.1), (None, 10.0, None), (5.0, 0.0, None)])
def test_ratio(operator: float | None, baseline: float, expected: float | None) -> None:
    assert figures.ratio(operator, baseline) == expected


@pytest.mark.parametrize(("ours", "raw", "expected"), [
    # The operator, its admission child and a py-spy recording it are left out of the side.
    ({"machine": 31.0, "operator": 2.0, "admission_child": 0.5, "py-spy": 0.5,
      "kube-apiserver": 15.0}, {"machine": 20.0}, 1.4),
    ({"machine": 30.0, "kube-apiserver": 15.0}, {"machine": 20.0}, 1.5),  # none sampled
    ({"machine": 30.0}, {}, None),
    (None, {"machine": 20.0}, None),
    ({"operator": 2.0}, {"machine": 20.0}, None),  # no machine figure
])
def test_the_floor_ratio_leaves_the_operators_processes_out(
        ours: dict[str, float] | None, raw: dict[str, float], expected: float | None) -> None:
    assert figures.floor_ratio(ours, raw) == expected


def test_top_frames_rank_own_and_inclusive_time() -> None:
    collapsed = "\n".join([
        "main (/x/lws_operator/__main__.py:10);reconcile (/x/lws_operator/controllers/l.py:5);"
        "loads (/usr/lib/python3.11/json/__init__.py:3) 6",
        "main (/x/lws_operator/__main__.py:10);select (/usr/lib/python3.11/selectors.py:1) 4",
        "garbage line",
    ])
    top = figures.top_frames(collapsed)
    assert top["samples"] == 10
    assert top["self"] == [("loads (json/__init__.py)", 0.6), ("select (selectors.py)", 0.4)]
    assert top["inclusive"] == [("main (lws_operator/__main__.py)", 1.0),
                                ("reconcile (lws_operator/controllers/l.py)", 0.6)]
    assert figures.top_frames("")["samples"] == 0


def test_a_histograms_mean_comes_from_its_sum_and_count() -> None:
    scrape = figures.parse(OPERATOR)
    assert figures.mean(scrape, "h") == 0.004
    assert figures.mean(scrape, "h", unit=0.001) == 4.0
    assert figures.mean(scrape, "absent") is None


def _svg(frames: list[tuple[str, int, int, int]]) -> str:
    """An inferno flame graph's frames as py-spy writes them: (title, y, fg:x, fg:w)."""
    return "".join(
        f'<g><title>{title} ({w} samples, {w * 10}%)</title><rect x="{x * 10}.0000%" y="{y}" '
        f'width="{w * 10}.0000%" height="15" fill="rgb(1,2,3)" fg:x="{x}" fg:w="{w}"/>'
        f'<text x="1" y="2"></text></g>\n' for title, y, x, w in frames)


@pytest.mark.parametrize("rows", [
    {"all": 52, "a": 68, "b": 84},  # icicle: the root on top, as py-spy draws it
    {"all": 100, "a": 84, "b": 68},  # flame: the root at the bottom
])
def test_a_flame_graph_reads_back_as_the_stacks_it_was_drawn_from(rows: dict[str, int]) -> None:
    svg = _svg([("all", rows["all"], 0, 10),
                ("run (lws_operator/x.py:1)", rows["a"], 0, 7),
                ("&lt;lambda&gt; (json/y.py:2)", rows["b"], 0, 4),
                ("poll (selectors.py:3)", rows["a"], 7, 2)])
    collapsed = figures.collapsed_from_flamegraph(svg)
    assert sorted(collapsed.splitlines()) == [
        "poll (selectors.py:3) 2",
        "run (lws_operator/x.py:1) 3",
        "run (lws_operator/x.py:1);<lambda> (json/y.py:2) 4",
    ]
    assert figures.top_frames(collapsed)["samples"] == 9


def test_a_flame_graph_without_samples_reads_back_as_none() -> None:
    # What py-spy writes for a phase in which the operator never ran Python code.
    svg = '<svg><text x="50.0000%" y="24.00">ERROR: No valid input provided</text></svg>'
    assert figures.collapsed_from_flamegraph(svg) == ""
    assert figures.top_frames("")["samples"] == 0


def _round(create: float, rollout: float, cpu: float, rss: float, steady: int,
           exit_code: int = 0, first: float | None = 0.3, p99: float = 4.0) -> dict[str, object]:
    return {"ratios": {"create": create, "rollout": rollout},
            "webhook_at_rate": {"achieved_rate": 200.0 - 10 * p99, "server_ms": {"p99": p99}},
            "plot": f"plot-{rollout}.png",
            "baseline": {"create": {"seconds": 10.0, "first_ready_seconds": 0.4}},
            "operator": {"create": {"seconds": 10.0 * create, "first_ready_seconds": first},
                         "cpu_seconds": {"create": cpu}, "exit_code": exit_code,
                         "memory_mib": {"peak_rss": rss},
                         "steady_state": {"writes": steady},
                         "api_requests": {"create": {"create": 400 + steady}}}}


def test_a_single_round_is_the_summary_itself() -> None:
    only = _round(1.3, 1.7, 2.5, 100.0, 0)
    assert figures.combine_rounds([only], figures.middle_round([only])) is only


def test_rounds_combine_to_medians_but_the_worst_where_every_round_must_pass() -> None:
    rounds = [_round(1.4, 2.1, 2.9, 101.0, 0, p99=8.0),
              _round(1.2, 1.5, 2.5, 104.0, 3, exit_code=1, p99=4.1),
              _round(1.3, 1.7, 2.7, 99.0, 0, p99=4.4)]
    middle = figures.middle_round(rounds)
    assert middle == 2  # the median rollout ratio (1.7)
    combined = figures.combine_rounds(rounds, middle)
    assert combined["ratios"] == {"create": 1.3, "rollout": 1.7}
    assert combined["operator"]["cpu_seconds"] == {"create": 2.7}
    assert combined["operator"]["api_requests"] == {"create": {"create": 400}}  # observed ints
    # A peak, the steady window and the exit code: the worst round, not the median.
    assert combined["operator"]["memory_mib"] == {"peak_rss": 104.0}
    assert combined["operator"]["steady_state"] == {"writes": 3}
    assert combined["operator"]["exit_code"] == 1
    assert combined["plot"] == "plot-1.7.png"  # texts are the middle round's
    assert combined["middle_round"] == 3
    assert [r["ratios"]["rollout"] for r in combined["rounds"]] == [2.1, 1.5, 1.7]
    assert combined["rounds"][1]["peak_rss_mib"] == 104.0
    # Each round measured the webhook at rate too: its median, each round's kept.
    assert combined["webhook_at_rate"]["server_ms"] == {"p99": 4.4}
    assert [r["webhook_p99_ms"] for r in combined["rounds"]] == [8.0, 4.1, 4.4]
    assert combined["rounds"][0]["webhook_rate"] == 120.0


def test_a_figure_missing_from_a_round_is_the_middle_rounds() -> None:
    rounds = [_round(1.4, 1.6, 2.9, 101.0, 0, first=None), _round(1.2, 1.5, 2.5, 104.0, 0),
              _round(1.3, 1.9, 2.7, 99.0, 0)]
    combined = figures.combine_rounds(rounds, figures.middle_round(rounds))
    assert combined["operator"]["create"]["first_ready_seconds"] is None  # round 1's
    rounds[0]["operator"]["create"]["first_ready_seconds"] = 0.5  # type: ignore[index]
    combined = figures.combine_rounds(rounds, figures.middle_round(rounds))
    assert combined["operator"]["create"]["first_ready_seconds"] == 0.3


def test_cpu_spent_is_per_process_and_leaves_out_one_that_was_not_sampled_twice() -> None:
    from e2e.bench.scale import cpu_spent
    assert cpu_spent({"machine": 10.0, "etcd": 1.0}, {"machine": 12.5, "etcd": 1.25,
                                                       "operator": 3.0}) == {
        "machine": 2.5, "etcd": 0.25}


class _Writing:
    """An operator whose metrics show the given Event counts, then the last one for good."""

    def __init__(self, *events: int) -> None:
        self.events = list(events)
        self.scrapes = 0

    async def metrics(self) -> str:
        self.scrapes += 1
        n = self.events.pop(0) if len(self.events) > 1 else self.events[0]
        return ('lws_operator_api_requests_total{verb="create",resource="events",code="201"} '
                f'{n}\n'
                'lws_operator_api_requests_total{verb="update",resource="leases",code="200"} '
                f'{self.scrapes}\n')


async def test_a_phase_ends_once_the_operators_trailing_writes_have_stopped() -> None:
    from e2e.bench.scale import Run
    trailing = _Writing(178, 180, 180)
    await Run.requests_settled(trailing, quiet=0.01)  # type: ignore[arg-type]
    assert trailing.scrapes == 3  # Leases alone do not keep it waiting
    endless = _Writing(*range(1000))
    await Run.requests_settled(endless, quiet=0.01, timeout=0.05)  # type: ignore[arg-type]
    assert endless.scrapes < 10  # an operator that keeps writing ends the wait at the timeout


def test_the_flame_graphs_come_from_a_round_of_their_own() -> None:
    from e2e.bench.scale import Phase, with_profile
    measured = {"ratios": {"create": 1.2}, "operator": {"cpu_seconds": {"create": 2.0}}}
    assert with_profile(measured, None) == measured  # --no-py-spy: no profiled round
    profiled = {"phases": {"create": Phase(9.5, {"a": 9.0}, [], 0.3, None,
                                           {"operator": 2.5, "py-spy": 0.7})},
                "cpu_seconds": {"create": 2.4}, "exit_code": 0,
                "flame_graphs": {"create": "scale-x-profiled-create.svg"},
                "hotspots": {"create": {"samples": 10}}}
    summary = with_profile(measured, profiled)
    # The measured figures stay the unprofiled round's; the graphs and hotspots join them.
    assert summary["ratios"] == {"create": 1.2}
    assert summary["operator"] == {"cpu_seconds": {"create": 2.0},
                                   "flame_graphs": {"create": "scale-x-profiled-create.svg"},
                                   "hotspots": {"create": {"samples": 10}}}
    # What the profiled round cost, py-spy's own CPU named, is reported apart.
    apart = summary["profiled_round"]
    assert apart["cpu_seconds"] == {"create": 2.4}
    assert apart["phases"]["create"]["seconds"] == 9.5
    assert apart["phases"]["create"]["cpu_seconds_by_process"]["py-spy"] == 0.7
    assert measured == {"ratios": {"create": 1.2},
                        "operator": {"cpu_seconds": {"create": 2.0}}}  # not changed in place
