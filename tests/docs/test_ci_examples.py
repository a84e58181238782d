"""The CI examples in docs/ci/ parse, call only make targets the Makefile has (and those targets
run kvgate nightly), and collect the files the nightly really writes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from harness.report.render import JUNIT_XML, REPORT_HTML

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "docs" / "ci"


def _commands(doc: Any) -> list[str]:
    """Every shell command of a workflow (steps' ``run``) or GitLab job (``script``)."""
    out: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("run", "script", "before_script", "after_script"):
                out += [value] if isinstance(value, str) else [str(v) for v in value]
            else:
                out += _commands(value)
    elif isinstance(doc, list):
        for v in doc:
            out += _commands(v)
    return out


def _make_targets(commands: list[str]) -> list[str]:
    return [m.group(1) for c in commands for m in re.finditer(r"\bmake\s+([a-zA-Z0-9_-]+)", c)]


def _files_named(doc: Any) -> str:
    return yaml.safe_dump(doc, width=1000)


def test_github_workflow() -> None:
    doc = yaml.safe_load((CI / "github-actions-nightly.yml").read_text())
    assert doc["name"] and doc["jobs"]["nightly"]["runs-on"][0] == "self-hosted"
    on = doc[True] if True in doc else doc["on"]  # YAML 1.1 reads the bare key `on` as true
    assert on["schedule"][0]["cron"]
    targets = _make_targets(_commands(doc))
    assert targets == ["nightly"]
    text = _files_named(doc)
    for name in (JUNIT_XML, REPORT_HTML, "trend.html"):
        assert f"reports/nightly-*/nightly/{name}" in text


def test_gitlab_job() -> None:
    doc = yaml.safe_load((CI / "gitlab-ci-nightly.yml").read_text())
    job = doc["kvgate-nightly"]
    assert "kvgate" in job["tags"]
    assert any(r["if"] == '$CI_PIPELINE_SOURCE == "schedule"' for r in job["rules"])
    assert _make_targets(_commands(doc)) == ["nightly"]
    assert job["artifacts"]["reports"]["junit"] == f"reports/nightly-*/nightly/{JUNIT_XML}"
    assert "reports/nightly-*/nightly/trend.html" in job["artifacts"]["paths"]


def test_the_targets_exist_and_run_kvgate_nightly() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^nightly:", makefile, re.M)
    # Dry run: the target resolves and the command it runs is kvgate nightly (with the history URL
    # passed through when given).
    out = subprocess.run(["make", "-n", "-C", str(ROOT), "nightly", "HISTORY=sqlite:////tmp/h.sqlite",  # noqa: S603
                          "VENV=.venv"], capture_output=True, text=True, check=True).stdout.replace("\\\n", " ")
    line = next(ln for ln in out.splitlines() if "kvgate nightly" in ln)
    assert "--profile profiles/nightly.yaml" in line and "--history sqlite:////tmp/h.sqlite" in line
    assert "--create-local-targets" in line  # default inventory: localhost
    out = subprocess.run(["make", "-n", "-C", str(ROOT), "nightly", "INVENTORY=inventory/lab.yaml"],  # noqa: S603
                         capture_output=True, text=True, check=True).stdout
    assert "--create-local-targets" not in out and "--history" not in out
