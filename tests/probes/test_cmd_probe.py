"""``kvgate probe`` end to end on localhost: real fio, real files, results.json and the table; and
``--parse`` on saved outputs, including the errors a user sees for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.cli.main import run
from harness.ports import free_ports

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"


def _files(tmp_path: Path, **fio: object) -> tuple[Path, Path, Path]:
    tier = tmp_path / "tier"
    tier.mkdir()
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        yaml.safe_dump(
            {
                "cluster": "t",
                "nodes": [
                    {
                        "name": "local",
                        "host": "localhost",
                        "connection": "local",
                        "storage": [
                            {"name": "fast", "path": str(tier)},
                            {"name": "full", "path": str(tier), "min_free": "1 PB"},
                        ],
                    }
                ],
            }
        )
    )
    prof = yaml.safe_load((Path(__file__).resolve().parents[2] / "profiles" / "demo.yaml").read_text())
    prof["probes"] = {
        "fio": {
            "job_sets": ["seq-read", "seq-write"],
            "size": "4 MiB",
            "runtime": "1s",
            "ramp_time": "0s",
            "numjobs": 1,
            "iodepth": 4,
            "targets": ["fast"],
            **fio,
        },
        "checkpoint": {"size": "8 MiB", "files": 2, "writers": 2, "read_back": True, "target": "fast"},
        "modelload": {"readers": 2, "synthetic_size": "8 MiB", "targets": ["fast"]},
    }
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump(prof))
    return inv, profile, tier


@pytest.mark.fio
def test_probe_fio_table_and_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv, profile, tier = _files(tmp_path)
    out = tmp_path / "out"
    code = run(["probe", "fio", "--inventory", str(inv), "--profile", str(profile), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "job set" in captured.out and "seq-read" in captured.out and "local" in captured.out
    results = json.loads((out / "results.json").read_text())
    raw = json.loads((out / "fio-local-fast.json").read_text())
    jobs = {j["jobname"]: j for j in raw["jobs"]}
    bw = results["bandwidth_bytes_per_s"]["local"]["fast"]
    assert bw["seq-read"]["read_bw_bytes"] == jobs["seq-read"]["read"]["bw_bytes"]
    assert bw["seq-write"]["write_bw_bytes"] == jobs["seq-write"]["write"]["bw_bytes"]
    assert results["results"][0]["evidence"]["raw_output"] == "fio-local-fast.json"
    assert f"{jobs['seq-read']['read']['bw_bytes'] / 1e9:.3f}" in captured.out
    assert list(tier.iterdir()) == []


def test_probe_fio_refusal_is_exit_2_with_results_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv, profile, _ = _files(tmp_path)
    out = tmp_path / "out"
    code = run(
        [
            "probe",
            "fio",
            "--inventory",
            str(inv),
            "--profile",
            str(profile),
            "--out",
            str(out),
            "--target",
            "full",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "local/full" in err and "not enough free space" in err
    assert json.loads((out / "results.json").read_text())["failures"][0]["target"] == "full"


def test_probe_unknown_target_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv, profile, _ = _files(tmp_path)
    code = run(
        [
            "probe",
            "fio",
            "--inventory",
            str(inv),
            "--profile",
            str(profile),
            "--target",
            "nope",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2 and "nope not found" in capsys.readouterr().err


def test_probe_checkpoint_and_modelload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv, profile, tier = _files(tmp_path)
    code = run(
        [
            "probe",
            "checkpoint",
            "--inventory",
            str(inv),
            "--profile",
            str(profile),
            "--out",
            str(tmp_path / "ck"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "write GB/s" in out
    ck = json.loads((tmp_path / "ck" / "results.json").read_text())["results"][0]
    assert ck["total_bytes"] == 8 * 2**20 and ck["write_bw_bytes"] > 0 and ck["read_back"]["bw_bytes"] > 0
    assert (tmp_path / "ck" / ck["evidence"]).exists()
    code = run(
        [
            "probe",
            "modelload",
            "--inventory",
            str(inv),
            "--profile",
            str(profile),
            "--out",
            str(tmp_path / "ml"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "read GB/s" in out
    ml = json.loads((tmp_path / "ml" / "results.json").read_text())["results"][0]
    assert ml["total_bytes"] == 8 * 2**20 and ml["read_bw_bytes"] > 0 and ml["may_include_cached"] is False
    assert list(tier.iterdir()) == []


def test_parse_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(DATA / "fio-2.16-client-server.json"), str(DATA / "fio-3.33-json.json")]
    assert run(["probe", "fio", "--parse", *files]) == 0
    out = capsys.readouterr().out
    assert "node-a:8765" in out and "sum of 2 hosts" in out and "3.221" in out  # 3 GiB/s = 3.221 GB/s
    assert run(["probe", "fio", "--parse", *files, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["cluster"][0]["read"]["bw_bytes"] == 3_221_225_472
    assert (
        data[1]["per_node"]["local"][0]["read"]["bw_bytes"]
        == json.loads((DATA / "fio-3.33-json.json").read_text())["jobs"][0]["read"]["bw_bytes"]
    )


@pytest.mark.parametrize(
    "content", [b"", b"<html><body>502 Bad Gateway</body></html>", b"\x00\xff\x13garbage"]
)
def test_parse_bad_files_exit_2_naming_the_file(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert run(["probe", "fio", "--parse", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "Traceback" not in err


def test_probe_help_and_missing_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["probe", "fio", "--help"]) == 0
    assert "--parse" in capsys.readouterr().out
    assert run(["probe", "checkpoint"]) == 2
    assert run(["probe", "fio"]) == 2
    assert "--inventory and --profile are required" in capsys.readouterr().err


@pytest.mark.fio
def test_probe_fio_client_server_two_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, profile, _ = _files(tmp_path)
    tiers = [tmp_path / "a", tmp_path / "b"]
    for t in tiers:
        t.mkdir()
    inv = tmp_path / "inv2.yaml"
    inv.write_text(
        yaml.safe_dump(
            {
                "cluster": "two",
                "nodes": [
                    {
                        "name": f"n{i}",
                        "host": "127.0.0.1",
                        "connection": "local",
                        "storage": [{"name": "fast", "path": str(t)}],
                    }
                    for i, t in enumerate(tiers)
                ],
            }
        )
    )
    out = tmp_path / "out"
    # both "nodes" are this machine: the second server gets the next port
    port = free_ports(2)  # the second server takes the next port: both must be free
    code = run(
        [
            "probe",
            "fio",
            "--client-server",
            "--inventory",
            str(inv),
            "--profile",
            str(profile),
            "--out",
            str(out),
            "--port",
            str(port),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "sum of 2 hosts" in captured.out
    results = json.loads((out / "results.json").read_text())
    assert results["kind"] == "fio-cluster" and [s["port"] for s in results["servers"]] == [port, port + 1]
    res = results["results"][0]
    per_host = {h: v["seq-read"]["read_bw_bytes"] for h, v in res["per_host"].items()}
    assert set(per_host) == {"n0", "n1"}
    assert res["job_sets"]["seq-read"]["read_bw_bytes"] == sum(per_host.values()) > 0
    assert all(list(t.iterdir()) == [] for t in tiers)
