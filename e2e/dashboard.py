"""The chart's Grafana dashboard read as Grafana would: its panels, their queries with the
template variables substituted, and a picture of them drawn from a real Prometheus.

Grafana is not available on this machine, so ``plot`` draws each panel's queries (range queries
against the same Prometheus the end-to-end test fills) with matplotlib, in a grid laid out from
the panels' ``gridPos`` (24 columns, as Grafana's). ``make dashboard-png`` runs the test that
produces ``docs/dashboard.png`` this way.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.prometheus import Prometheus

DASHBOARD = (Path(__file__).resolve().parents[1] / "charts" / "lws-operator" / "dashboards"
             / "lws-operator.json")
# What Grafana puts for $__rate_interval with a short scrape interval: four scrapes at least.
RATE_INTERVAL = "1m"


@dataclass(frozen=True)
class Target:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # timeseries or stat
    unit: str
    grid: tuple[int, int, int, int]  # x, y, w, h in Grafana's 24-column grid
    targets: tuple[Target, ...]


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def panels(dashboard: dict[str, Any]) -> list[Panel]:
    """Every panel with queries (rows are headings, not panels), in dashboard order."""
    out = []
    for raw in dashboard["panels"]:
        if raw["type"] == "row":
            continue
        grid = raw["gridPos"]
        out.append(Panel(raw["title"], raw["type"],
                         raw.get("fieldConfig", {}).get("defaults", {}).get("unit", "short"),
                         (grid["x"], grid["y"], grid["w"], grid["h"]),
                         tuple(Target(t["expr"], t.get("legendFormat", ""))
                               for t in raw["targets"])))
    return out


def variables(dashboard: dict[str, Any]) -> list[str]:
    return [v["name"] for v in dashboard["templating"]["list"]]


def substitute(expr: str, values: dict[str, str], rate_interval: str = RATE_INTERVAL) -> str:
    """``expr`` with ``$name`` / ``${name}`` replaced as Grafana does for a single value of
    a regex-matched variable, and ``$__rate_interval`` with ``rate_interval``; every variable
    used must be given (an unknown one is an error, not left in the query)."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name == "__rate_interval":
            return rate_interval
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr}")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def legend(template: str, metric: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""),
                  template) or "value"


def plot(prom: Prometheus, dashboard: dict[str, Any], values: dict[str, str], start: float,
         end: float, path: Path, title: str) -> None:
    """Draw every panel's queries over [start, end] into ``path`` (PNG), laid out as the
    dashboard's grid, with its rows' headings."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display here
    import matplotlib.pyplot as plt

    found = panels(dashboard)
    rows = max(p.grid[1] + p.grid[3] for p in found)
    fig = plt.figure(figsize=(20, rows * 0.36))
    grid = fig.add_gridspec(rows, 24, hspace=2.4, wspace=1.8, top=0.96, bottom=0.03,
                            left=0.03, right=0.99)
    for raw in dashboard["panels"]:
        if raw["type"] == "row":
            y = raw["gridPos"]["y"]
            heading = fig.add_subplot(grid[y:y + 1, :])
            heading.axis("off")
            heading.text(0, 0, raw["title"], fontsize=13, fontweight="bold",
                         transform=heading.transAxes)
    step = max((end - start) / 300, 1.0)
    for panel in found:
        x, y, w, h = panel.grid
        ax = fig.add_subplot(grid[y:y + h - 1, x:x + w])
        ax.set_title(panel.title, fontsize=10, loc="left")
        series = []
        for target in panel.targets:
            expr = substitute(target.expr, values)
            for result in prom.query_range(expr, start, end, step):
                points = [(float(t) - start, float(v)) for t, v in result["values"]
                          if not math.isnan(float(v))]
                series.append((legend(target.legend, result["metric"]), points))
        if panel.kind == "stat":
            last = [pts[-1][1] for _, pts in series if pts]
            ax.axis("off")
            ax.text(0.5, 0.4, _format(last[-1] if last else math.nan, panel.unit),
                    ha="center", va="center", fontsize=40, color="tab:green",
                    transform=ax.transAxes)
            continue
        # The busiest series first; a legend of at most eight of them.
        series.sort(key=lambda s: -max((p[1] for p in s[1]), default=0.0))
        for i, (label, points) in enumerate(series):
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], linewidth=1.3,
                        label=label if i < 8 else None)
        ax.set_xlim(0, end - start)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if panel.unit == "percentunit":
            ax.set_ylim(-0.05, 1.05)
        elif panel.unit not in ("short", ""):
            ax.set_ylabel(panel.unit, fontsize=8)
        if any(points for _, points in series):
            more = len(series) - 8
            ax.legend(fontsize=7, loc="upper left", ncol=2, framealpha=0.7,
                      title=f"(+{more} more)" if more > 0 else None, title_fontsize=7)
        else:
            ax.text(0.5, 0.5, "no data points (NaN: nothing observed in the interval)",
                    ha="center", va="center", fontsize=8, color="gray", transform=ax.transAxes)
    fig.suptitle(title, fontsize=14)
    fig.text(0.5, 0.005, "seconds since the start of the run", ha="center", fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)


def _format(value: float, unit: str) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:g}" if unit in ("short", "") else f"{value:g} {unit}"
