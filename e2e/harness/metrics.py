"""Reading the operator's metrics: a Prometheus scrape as a dict, and which verbs are writes."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

# The verbs of our client's request counter that change something.
WRITE_VERBS = frozenset({"create", "update", "patch", "apply", "delete", "deletecollection"})

Labels = tuple[tuple[str, str], ...]
Scrape = dict[tuple[str, Labels], float]


def parse(text: str) -> Scrape:
    """Every sample of a Prometheus text exposition, by (sample name, sorted labels)."""
    out: Scrape = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return out


def select(scrape: Scrape, metric: str, /, **match: str) -> dict[Labels, float]:
    """The samples called ``name`` whose labels include ``match``."""
    return {labels: value for (sample, labels), value in scrape.items()
            if sample == metric and all(dict(labels).get(k) == v for k, v in match.items())}


def total(scrape: Scrape, metric: str, /, **match: str) -> float:
    return sum(select(scrape, metric, **match).values())
