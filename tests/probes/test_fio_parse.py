"""The fio JSON/json+ parser on real fio 3.33 captures and on hand-checked older formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.probes.errors import FioParseError
from harness.probes.fio_parse import (
    parse_fio_file,
    parse_fio_output,
    summarise_cluster,
    summarise_groups,
    summarise_per_node,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"


def test_fio_333_json_figures_equal_the_raw_document() -> None:
    path = DATA / "fio-3.33-json.json"
    raw = json.loads(path.read_text())
    out = parse_fio_file(path, node="n1")
    doc = out.final
    assert doc.fio_version == "fio-3.33" and doc.version == (3, 33)
    seq, rw = doc.jobs
    assert seq.read is not None and seq.write is None and seq.trim is None
    assert seq.read.bw_bytes == raw["jobs"][0]["read"]["bw_bytes"]
    assert seq.read.bw_source == "bw_bytes"
    assert seq.read.io_bytes == raw["jobs"][0]["read"]["io_bytes"]
    assert seq.read.iops == raw["jobs"][0]["read"]["iops"]
    assert seq.read.gb_s == pytest.approx(raw["jobs"][0]["read"]["bw_bytes"] / 1e9)
    lat = seq.read.latency
    assert lat is not None and lat.kind == "clat"
    assert lat.p99 == raw["jobs"][0]["read"]["clat_ns"]["percentile"]["99.000000"]
    assert lat.p99_99 == raw["jobs"][0]["read"]["clat_ns"]["percentile"]["99.990000"]
    assert lat.mean_ns == raw["jobs"][0]["read"]["clat_ns"]["mean"]
    assert rw.write is not None and rw.read is None
    assert rw.write.bw_bytes == raw["jobs"][1]["write"]["bw_bytes"]
    assert seq.host == "n1"
    assert doc.disk_util and doc.disk_util[0].name == raw["disk_util"][0]["name"]
    assert doc.global_options[""]["ioengine"] == "libaio"


def test_jsonplus_keeps_bins_and_same_figures() -> None:
    out = parse_fio_file(DATA / "fio-3.33-jsonplus.json")
    raw = json.loads((DATA / "fio-3.33-jsonplus.json").read_text())
    read = out.final.jobs[0].read
    assert read is not None
    bins = read.bins_ns()
    assert bins is not None
    assert sum(bins.values()) == raw["jobs"][0]["read"]["clat_ns"]["N"]
    assert read.bw_bytes == raw["jobs"][0]["read"]["bw_bytes"]


def test_fio_2_2_units_are_converted() -> None:
    # Hand-written: io_bytes 1048576 KiB, bw 102400 KiB/s, clat in usec, "0.00" padding.
    out = parse_fio_file(DATA / "fio-2.2.10-json.json")
    assert out.final.version == (2, 2, 10)
    assert out.other_lines and out.other_lines[0].startswith("fio: this platform")
    job = out.final.jobs[0]
    assert job.read is not None and job.write is None
    assert job.read.io_bytes == 1048576 * 1024
    assert job.read.bw_bytes == 102400 * 1024 == 104_857_600
    assert job.read.bw_source == "bw (KiB/s)"
    assert job.read.runtime_ms == 10240
    clat = job.read.clat
    assert clat is not None and clat.samples is None
    assert clat.mean_ns == pytest.approx(9950.25 * 1000)
    assert clat.p50 == 9984 * 1000
    assert clat.p99_9 == 40192 * 1000
    assert 0.0 not in clat.percentiles
    assert job.read.lat is not None and job.read.lat.mean_ns == pytest.approx(9970.75e3)
    assert out.final.disk_util[0].util_percent == pytest.approx(99.10)


def test_fio_3_1_bytes_with_io_kbytes_and_no_bw_bytes() -> None:
    job = parse_fio_file(DATA / "fio-3.1-json.json").final.jobs[0]
    assert job.read is not None and job.write is not None
    assert job.read.io_bytes == 143_360_000  # io_kbytes present: io_bytes is bytes
    assert job.read.bw_bytes == 28000 * 1024
    assert job.write.bw_bytes == 12000 * 1024
    assert job.read.clat is not None and job.read.clat.p50 == 1466368  # already ns
    assert job.error == 0 and job.total_err == 2 and job.error_count == 2
    (group,) = summarise_groups([job])
    assert group.read is not None and group.write is not None
    assert group.read.bw_bytes + group.write.bw_bytes == (28000 + 12000) * 1024
    assert group.errors == 2


def test_client_server_333_two_hosts_sum_and_all_clients() -> None:
    path = DATA / "fio-3.33-client-server-2hosts.json"
    text = path.read_text()
    raw = json.loads(text[text.index("\n{"):])
    out = parse_fio_file(path)
    doc = out.final
    assert doc.client_server
    assert any(line.startswith("<vm>") for line in out.other_lines)
    assert {j.host for j in doc.jobs} == {"127.0.0.1:18765", "127.0.0.1:18766"}
    per_host = {f"{e['hostname']}:{e['port']}": e["read"]["bw_bytes"] for e in raw["client_stats"]
                if e["jobname"] != "All clients"}
    nodes = summarise_per_node(doc)
    assert {h: g[0].read.bw_bytes for h, g in nodes.items() if g[0].read} == per_host
    (cluster,) = summarise_cluster([doc])
    assert cluster.read is not None
    assert cluster.read.bw_bytes == sum(per_host.values())
    assert dict(cluster.read.per_host_bw) == per_host
    # fio's own "All clients" figure is kept apart (it divides total bytes by the longest runtime)
    (allc,) = doc.all_clients
    assert allc.read is not None
    raw_all = next(e for e in raw["client_stats"] if e["jobname"] == "All clients")
    assert allc.read.bw_bytes == raw_all["read"]["bw_bytes"]
    # without json+ bins, percentiles of two hosts cannot be merged: said, not invented
    assert cluster.read.percentiles_ns == {}
    assert "bins" in cluster.read.percentiles_note
    assert len(doc.disk_util) == 2 and {d.host for d in doc.disk_util} == set(per_host)


def test_client_server_jsonplus_merges_percentiles_from_bins() -> None:
    doc = parse_fio_file(DATA / "fio-3.33-client-server-2hosts-jsonplus.json").final
    (cluster,) = summarise_cluster([doc])
    assert cluster.read is not None and cluster.read.percentiles_note == "merged from json+ clat bins"
    p50 = cluster.read.percentiles_ns[50.0]
    host_p50 = sorted(j.read.clat.p50 for j in doc.jobs if j.read and j.read.clat and j.read.clat.p50)
    assert host_p50[0] <= p50 <= host_p50[-1]


def test_fio_2_16_client_server_kib_units() -> None:
    out = parse_fio_file(DATA / "fio-2.16-client-server.json")
    doc = out.final
    assert out.other_lines[0].startswith("hostname=node-a")
    a, b = doc.jobs
    assert (a.host, b.host) == ("node-a:8765", "node-b:8765")
    assert a.read is not None and b.read is not None
    assert a.read.bw_bytes == 2_147_483_648 and b.read.bw_bytes == 1_073_741_824
    assert a.read.io_bytes == 62914560 * 1024
    assert a.read.bins_ns() is None  # 2.x index-keyed bins are not latencies
    (cluster,) = summarise_cluster([doc])
    assert cluster.read is not None and cluster.read.bw_bytes == 3_221_225_472
    assert cluster.read.gb_s == pytest.approx(3.221225472)
    assert doc.all_clients[0].read is not None and doc.all_clients[0].read.bw_bytes == 3_221_225_472
    # sample-weighted mean of clat: both hosts lack N (2.x), so only the single-entry case is exact
    assert cluster.read.entries == 2


def test_fio_339_global_options_list_and_ns_bins_merge() -> None:
    doc = parse_fio_file(DATA / "fio-3.39-client-global-list.json").final
    assert set(doc.global_options) == {"node-a:8765", "node-b:8765"}
    assert doc.global_options["node-b:8765"]["directory"] == "/mnt/b"
    (cluster,) = summarise_cluster([doc])
    assert cluster.read is not None
    assert cluster.read.bw_bytes == 409_600_000 + 204_800_000
    # hand-checked from the bins: 1.5M samples; p50 -> 700000 ns, p90 -> 1300000 ns, p99 -> 1600000 ns
    assert cluster.read.percentiles_ns[50.0] == 700000
    assert cluster.read.percentiles_ns[90.0] == 1300000
    assert cluster.read.percentiles_ns[99.0] == 1600000
    # weighted mean of clat: (1e6 * 640000 + 5e5 * 1280000) / 1.5e6
    assert cluster.read.clat_mean_ns == pytest.approx(853333.333, rel=1e-6)


def test_steadystate_sections() -> None:
    job = parse_fio_file(DATA / "fio-2.16-steadystate.json").final.jobs[0]
    ss = job.steadystate
    assert ss is not None and ss.attained and ss.duration_s == 5
    assert ss.bw_samples == (520e6, 530e6, 522e6, 526e6, 526e6)
    assert ss.snia.steady and ss.snia.samples == 5
    assert ss.snia.range_ratio == pytest.approx(10e6 / 524.8e6)
    real = parse_fio_file(DATA / "fio-3.33-steadystate.json").final.jobs[0].steadystate
    assert real is not None and real.criterion.startswith("bw:") and len(real.bw_samples) == 2
    assert not real.snia.steady and "at least 3" in real.snia.reason


def test_status_interval_documents_last_is_final() -> None:
    out = parse_fio_file(DATA / "fio-3.33-status-interval.json")
    assert len(out.documents) == 3
    ios = [d.jobs[0].read.io_bytes for d in out.documents if d.jobs[0].read]
    assert ios == sorted(ios) and out.final.jobs[0].read is not None
    assert out.final.jobs[0].read.io_bytes == ios[-1]


def test_zero_bandwidth_with_io_is_an_error() -> None:
    doc = json.loads((DATA / "fio-3.33-json.json").read_text())
    doc["jobs"][0]["read"]["bw_bytes"] = 0
    with pytest.raises(FioParseError, match=r"jobs\[0\] \('seqread'\)\.read: .* bandwidth of 0"):
        parse_fio_output(json.dumps(doc), source="zero.json")


@pytest.mark.parametrize(
    ("name", "data", "pattern"),
    [
        ("empty.json", b"", r"empty.json \(byte 0\): empty output"),
        ("blank.json", b"\n\n  \n", r"empty output"),
        ("html.json", b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n"
                      b"<body><h1>Bad Gateway</h1></body></html>\n", r"no fio JSON document found .*DOCTYPE"),
        ("garbage.bin", bytes(range(256)) * 8, r"no fio JSON document found .*binary data"),
        ("other.json", b'{"hello": 1}\n', r"other.json:1 \(byte 0\): a JSON object that is not fio output"),
        ("bad.json", b'{\n  "fio version" : "fio-3.33",\n  "jobs" : [ ,\n',
         r"bad.json:3:\d+ \(byte \d+\): invalid JSON"),
    ],
)
def test_malformed_inputs_name_file_and_position(name: str, data: bytes, pattern: str) -> None:
    with pytest.raises(FioParseError, match=pattern) as info:
        parse_fio_output(data, source=name)
    assert isinstance(info.value, InputError)


def test_truncated_real_output_names_line_and_byte(tmp_path: Path) -> None:
    full = (DATA / "fio-3.33-json.json").read_bytes()
    cut = full[: len(full) // 2]
    path = tmp_path / "cut.json"
    path.write_bytes(cut)
    with pytest.raises(FioParseError) as info:
        parse_fio_file(path)
    err = info.value
    assert err.source == str(path)
    assert "truncated" in str(err)
    assert err.line is not None and err.line > 10
    assert err.offset is not None and len(cut) - 200 <= err.offset <= len(cut)


def test_missing_field_is_named() -> None:
    doc = json.loads((DATA / "fio-3.33-json.json").read_text())
    del doc["jobs"][1]["write"]["iops"]
    with pytest.raises(FioParseError, match=r"jobs\[1\] \('randwrite'\)\.write: missing key 'iops'"):
        parse_fio_output(json.dumps(doc), source="x.json")


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(FioParseError, match="cannot read"):
        parse_fio_file(tmp_path / "nope.json")


def test_bare_nan_and_inf_from_fios_printf_are_accepted() -> None:
    # fio's json.c prints floats with "%f": a NaN stddev comes out as a bare -nan/nan (not JSON)
    text = (DATA / "fio-3.33-json.json").read_text()
    assert '"bw_dev" : 0.000000' in text and '"iops_stddev" : 0.000000' in text
    broken = text.replace('"bw_dev" : 0.000000', '"bw_dev" : -nan', 1)
    broken = broken.replace('"iops_stddev" : 0.000000', '"iops_stddev" : nan', 1)
    broken = broken.replace('"bw_agg" : 97.393270', '"bw_agg" : inf', 1)
    out = parse_fio_output(broken, source="nan.json")
    raw = json.loads(text)
    assert out.final.jobs[0].read is not None
    assert out.final.jobs[0].read.bw_bytes == raw["jobs"][0]["read"]["bw_bytes"]
    # a non-finite bandwidth is never a figure
    bad = text.replace(f'"bw_bytes" : {raw["jobs"][0]["read"]["bw_bytes"]}', '"bw_bytes" : -nan', 1)
    with pytest.raises(FioParseError, match=r"jobs\[0\] \('seqread'\)\.read: .*bandwidth of nan"):
        parse_fio_output(bad, source="nanbw.json")
