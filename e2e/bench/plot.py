"""The benchmark's picture: pods over time, operator against upstream and baseline, one panel per
phase."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display here

import matplotlib.pyplot as plt

# Which timeline column each phase plots: (index, label).
PANELS = {"create": (1, "Ready pods"), "rollout": (2, "Ready pods on the new image"),
          "delete": (3, "pods left")}


def plot(series: dict[str, dict[str, list[list[float]]]], path: Path, title: str) -> None:
    """``series[side][phase]``: timeline points ``[seconds, ready, ready_rolled, existing]``
    with seconds from the phase's start; ``side`` is ``operator``, ``upstream`` or
    ``baseline``."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 4.5))
    styles: dict[str, dict[str, Any]] = {"baseline": {"color": "tab:gray", "linestyle": "--"},
                                         "operator": {"color": "tab:blue"},
                                         "upstream": {"color": "tab:orange",
                                                      "linestyle": "-."}}
    for ax, (phase, (column, label)) in zip(axes, PANELS.items(), strict=True):
        for side, style in styles.items():
            points = series.get(side, {}).get(phase) or []
            if points:
                ax.step([p[0] for p in points], [p[column] for p in points], where="post",
                        label=side, **style)
        ax.set_title(phase)
        ax.set_xlabel("seconds")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
