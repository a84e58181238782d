"""G4 over several engine instances: the greedy probe set is compared per instance, and a check
sees every instance the profile declares (one missing is NOT_RUN, never a PASS on the others)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.pipelines.g4.soakdata import soak_measured
from tests.pipelines.test_g4_soakdata import write_soak


def probes(d: Path, name: str, per_instance: dict[int, list[tuple[str, str]]], *, with_instance: bool = True) -> None:
    answers: list[dict[str, Any]] = []
    for inst, items in per_instance.items():
        for rid, text in items:
            failed = text == "ERR"
            a = {"request_id": rid, "status": "error" if failed else "ok", "text": None if failed else text}
            if with_instance:
                a["instance"] = inst
            answers.append(a)
    (d / name).write_text(json.dumps({"instances": len(per_instance), "answers": answers}))


def leaf(d: Path, instances: int) -> dict[str, Any]:
    measured, _ = soak_measured(d, duration_target_s=60.0, window_s=4.0, instances=instances)
    return dict(measured["soak"]["probe_identical"])


SAME = [("probe-0", "a"), ("probe-1", "b")]


def test_every_instance_answers_the_same_at_the_end(tmp_path: Path) -> None:
    d = write_soak(tmp_path / "s")
    probes(d, "probe-start.json", {0: SAME, 1: SAME})
    probes(d, "probe-end.json", {0: SAME, 1: SAME})
    got = leaf(d, 2)
    assert got["value"] is True and got["text"] == "4 of 4 identical over 2 instances"


def test_an_instance_whose_answers_changed_fails_and_is_named(tmp_path: Path) -> None:
    d = write_soak(tmp_path / "s")
    probes(d, "probe-start.json", {0: SAME, 1: SAME})
    probes(d, "probe-end.json", {0: SAME, 1: [("probe-0", "a"), ("probe-1", "rotted")]})
    got = leaf(d, 2)
    assert got["value"] is False and "instance 1 probe-1" in got["detail"] and "instance 0" not in got["detail"]


@pytest.mark.parametrize("start,end,why", [
    # instance 0 only, as before the probes went to every instance: instance 1 was never asked
    ({0: SAME}, {0: SAME}, "instance 1 at the start, instance 1 at the end"),
    ({0: SAME, 1: SAME}, {0: SAME}, "instance 1 at the end"),
    ({0: SAME, 1: SAME}, {0: SAME, 1: [("probe-0", "a"), ("probe-1", "ERR")]}, "instance 1 probe-1"),
])
def test_an_instance_missing_or_failed_is_not_run_never_pass(tmp_path: Path, start: dict[int, Any],
                                                             end: dict[int, Any], why: str) -> None:
    d = write_soak(tmp_path / "s")
    probes(d, "probe-start.json", start)
    probes(d, "probe-end.json", end)
    got = leaf(d, 2)
    assert got["value"] is None and why in got["detail"], got


def test_files_without_instances_are_instance_0s(tmp_path: Path) -> None:
    d = write_soak(tmp_path / "s")
    probes(d, "probe-start.json", {0: SAME}, with_instance=False)
    probes(d, "probe-end.json", {0: SAME}, with_instance=False)
    assert leaf(d, 1)["value"] is True
    assert leaf(d, 2)["value"] is None  # a second declared instance is never vouched for by the first
