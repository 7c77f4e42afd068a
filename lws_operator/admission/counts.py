"""The admission process's webhook metrics, counted without ``prometheus_client``.

The child (``admission.child``) serves no metrics endpoint: its parent asks for its counts before
each scrape and serves them from its own registry (``admission.process``). Importing
``prometheus_client`` to count there cost the child about 5 MiB resident (the package's
``__init__`` imports its exposition: ``http.server``, ``wsgiref``, ``email``, ``urllib``;
docs/performance.md), for three counters, a gauge and a histogram. So the child counts in plain
numbers here, with the interface ``AdmissionServer`` uses of ``admission.metrics.WebhookMetrics``
(``labels(...).inc()``, ``observe``, ``dec``), and ``snapshot`` is what travels to the parent,
where ``admission.metrics.child_families`` turns it into the metric families
``WebhookMetrics`` would have exported (a unit test compares the two expositions).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

# controller-runtime's buckets (Prometheus' defaults) and three below 5 ms, where admissions
# are answered: without them every answer falls in one bucket and a p99 says nothing.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5,
                   0.75, 1.0, 2.5, 5.0, 7.5, 10.0, float("inf"))

# The codes of a failed admission (controller-runtime's ``Errored``): a request that could not
# be read (400) and a handler that raised (500). Refusals by policy (403, the eviction budget's
# 429) are answers, not failures.
FAILURE_CODES = (400, 500)

# What ``WebhookCounts.snapshot`` holds: per metric, its series by label values.
Snapshot = dict[str, Any]


class Value:
    """One counter's or gauge's series."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount


class Observations:
    """One histogram series: a count per bucket (not cumulative) and the sum."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0.0] * len(LATENCY_BUCKETS)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        self.sum += amount
        self.counts[bisect_left(LATENCY_BUCKETS, amount)] += 1.0


class Labelled:
    """A metric's series by label values, each made on its first ``labels`` call (a series
    exists, at zero, from then on, as ``prometheus_client``'s do)."""

    def __init__(self, make: type[Value] | type[Observations]) -> None:
        self.make = make
        self.series: dict[tuple[str, ...], Any] = {}

    def labels(self, *values: str) -> Any:
        key = tuple(str(v) for v in values)
        found = self.series.get(key)
        if found is None:
            found = self.series[key] = self.make()
        return found


class WebhookCounts:
    """``WebhookMetrics``' series (same attributes), counted in the admission process."""

    def __init__(self) -> None:
        self.requests = Labelled(Value)  # webhook, code
        self.latency = Labelled(Observations)  # webhook
        self.in_flight = Labelled(Value)  # webhook
        self.connections = Value()
        self.failures = Labelled(Value)  # webhook, code

    def snapshot(self) -> Snapshot:
        """Plain data for the parent (pickled): label values and numbers only."""
        def values(metric: Labelled) -> list[tuple[tuple[str, ...], float]]:
            return [(key, s.value) for key, s in metric.series.items()]

        return {
            "requests": values(self.requests),
            "latency": [(key, list(s.counts), s.sum) for key, s in self.latency.series.items()],
            "in_flight": values(self.in_flight),
            "connections": self.connections.value,
            "failures": values(self.failures),
        }
