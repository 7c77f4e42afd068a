"""The chart's alert rules through Prometheus' own ``promtool``: ``check rules`` on the
PrometheusRule as rendered (expressions, durations, annotation templates), and ``test rules``
with the unit tests of ``alert-rules.test.yaml``, which show every alert firing in its situation
and quiet in a near miss, on the rules rendered with the chart's default values.

``promtool`` comes from the same Debian package as the metrics tier's Prometheus
(``e2e.prometheus``), fetched once with ``apt-get download``; where it cannot be had (no
``apt-get``, no access to the package archive) these tests are skipped and say why.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import prometheus
from e2e.harness.chart import objects, render

TESTS = Path(__file__).with_name("alert-rules.test.yaml")


@pytest.fixture(scope="module")
def promtool() -> Path:
    try:
        return prometheus.promtool()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"promtool unavailable (Debian's prometheus package): {exc}")


def rendered() -> tuple[list[dict[str, Any]], str, str]:
    """The rule groups with the default values, the job and the Lease name they select."""
    objs = objects(render(values={"prometheusRule": {"enabled": True}}))
    [rule] = [o for o in objs if o["kind"] == "PrometheusRule"]
    [service] = [o for o in objs if o["kind"] == "Service"
                 and o["metadata"]["labels"].get("app.kubernetes.io/component") == "metrics"]
    [deployment] = [o for o in objs if o["kind"] == "Deployment"]
    [lease] = [a.split("=", 1)[1] for a in deployment["spec"]["template"]["spec"]
               ["containers"][0]["args"] if a.startswith("--leader-elect-resource-name=")]
    return rule["spec"]["groups"], service["metadata"]["name"], lease


def run(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_promtool_checks_the_rendered_rules(promtool: Path, tmp_path: Path) -> None:
    groups, _, _ = rendered()
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}))
    done = run(promtool, "check", "rules", "rules.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in groups)} rules found" in done.stdout


def test_promtool_unit_tests_fire_every_alert(promtool: Path, tmp_path: Path) -> None:
    groups, job, lease = rendered()
    # The unit tests compare labels; annotations (checked above) are left out, or each test
    # would have to spell out every description.
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}))
    text = TESTS.read_text().replace("JOB", job).replace("LEASE", lease)
    (tmp_path / "tests.yml").write_text(text)
    tested = {t["alertname"] for case in yaml.safe_load(text)["tests"]
              for t in case.get("alert_rule_test", [])}
    assert tested == {r["alert"] for g in groups for r in g["rules"]}, "an alert untested"
    done = run(promtool, "test", "rules", "tests.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_broken_expectation_fails(promtool: Path, tmp_path: Path) -> None:
    """The unit tests can fail: the same case expecting the wrong labels does."""
    groups, job, lease = rendered()
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}))
    text = TESTS.read_text().replace("JOB", job).replace("LEASE", lease)
    (tmp_path / "tests.yml").write_text(text.replace("name: stuck}", "name: moving}"))
    done = run(promtool, "test", "rules", "tests.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert "DisaggregatedSetNotProgressing" in done.stdout + done.stderr
