"""The KV emulator as a real process on loopback: tiers, real disk reads, errors, sharing."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sim.simhelpers import CONNECTOR, REPO, SimProc, lmcache_yaml, start_sim, words
from tests.support.procs import HANG_GUARD_S, wait_for

# chunk = 256 tokens x 16 KiB = 4 MiB; a 2048-token prompt = 8 chunks = 32 MiB read per disk hit
KV_ARGS = [
    "--kv-bytes-per-token",
    "16384",
    "--prefill-tokens-per-s",
    "10000",
    "--decode-tokens-per-s",
    "2000",
]


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Callable[..., SimProc]]:
    started: list[SimProc] = []

    def factory(*args: str, env: dict[str, str] | None = None, name: str = "sim") -> SimProc:
        s = start_sim(tmp_path, args=list(args), env=env, name=name)
        started.append(s)
        return s

    yield factory
    for s in started:
        s.stop()


def _disk_env(tmp_path: Path, disk: Path, **extra: Any) -> dict[str, str]:
    cfg = lmcache_yaml(
        tmp_path / f"lmcache-{disk.name}.yaml",
        chunk_size=256,
        local_cpu=False,
        local_disk=f"file://{disk}/",
        max_local_disk_size=1,
        **extra,
    )
    return {"LMCACHE_CONFIG_FILE": str(cfg)}


def _wait_stored(s: SimProc, tokens: float) -> None:
    # write-behind: poll the stored-token counter instead of sleeping a fixed time
    import time

    deadline = time.monotonic() + 60  # a hang guard: the writes land in well under a second when idle
    while s.metric("lmcache:num_stored_tokens_total") < tokens:
        assert time.monotonic() < deadline, s.log()
        time.sleep(0.02)


def _evict(s: SimProc) -> dict[str, int]:
    status, body, _ = s.request("POST", "/kvgate/evict")
    assert status == 200, body
    return dict(json.loads(body)["evicted"])


def test_memory_hit_faster_than_disk_hit_faster_than_recompute(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    s = sim("--kv-transfer-config", CONNECTOR, *KV_ARGS, env=_disk_env(tmp_path, disk))
    recompute, memory, from_disk = [], [], []
    for i in range(3):
        prompt = words(2048, f"doc{i}-")
        recompute.append(s.ttft(prompt))  # cold: nothing anywhere
        _wait_stored(s, 2048 * (i + 1))
        memory.append(s.ttft(prompt))  # emulated HBM hit
        assert _evict(s)["hbm"] >= 8
        from_disk.append(s.ttft(prompt))  # read back from the disk tier, page cache bypassed
    rec, mem, dsk = (statistics.median(x) for x in (recompute, memory, from_disk))
    # 2048 tokens / 10000 tok/s = 0.2 s of emulated prefill
    assert rec >= 0.2
    assert mem < dsk < rec, f"memory {mem:.4f}s disk {dsk:.4f}s recompute {rec:.4f}s"
    assert dsk - mem > 0.002, "a disk hit must cost a measurable real read"
    # the disk bytes were really read: 3 prompts x 8 chunks x 4 MiB
    assert s.metric("kvgate_sim:tier_read_bytes_total") == 3 * 8 * 4 * 2**20
    # vLLM computes the last prompt token itself (it samples from it); LMCache counts whole chunks
    assert s.metric("vllm:external_prefix_cache_hits_total") == 3 * 2047
    assert s.metric("lmcache:num_hit_tokens_total") == 3 * 2048
    assert s.metric("vllm:prefix_cache_hits_total") == 3 * 2048  # the memory hits
    assert s.metric("vllm:time_to_first_token_seconds_count") == 9
    assert 'mode="odirect"' in s.metrics()  # ext4 under tmp_path supports O_DIRECT
    assert len(list(disk.glob("*.kvchunk"))) == 24
    assert all(p.stat().st_size == 4 * 2**20 for p in disk.glob("*.kvchunk"))


def test_partial_prefix_reuse_and_chunk_chaining(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    s = sim("--kv-transfer-config", CONNECTOR, *KV_ARGS, env=_disk_env(tmp_path, tmp_path / "disk"))
    base = words(1024, "p")
    s.ttft(base)
    _wait_stored(s, 1024)
    _evict(s)
    # same first 512 tokens, then different: only the 2 leading chunks can be reused
    s.ttft(words(512, "p") + " " + words(512, "q"))
    assert s.metric("lmcache:num_hit_tokens_total") == 512
    # a different first chunk changes every later chunk hash: nothing reusable
    s.ttft("zzz " + base)
    assert s.metric("lmcache:num_hit_tokens_total") == 512


def test_two_instances_do_not_share_an_in_process_disk_tier(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    # LMCache's in-process local-disk backend indexes chunks in the engine's own memory: a second
    # instance on the same directory neither finds the first one's files (no sharing) nor knows
    # them when it evicts. The emulator used to share by file existence: kinder than LMCache.
    disk = tmp_path / "shared"
    env = _disk_env(tmp_path, disk)
    a = sim("--kv-transfer-config", CONNECTOR, *KV_ARGS, env=env, name="a")
    b = sim("--kv-transfer-config", CONNECTOR, *KV_ARGS, env=env, name="b")
    prompt = words(2048, "shared-")
    a.ttft(prompt)
    _wait_stored(a, 2048)
    assert len(list(disk.iterdir())) == 8
    b.ttft(prompt)  # b never saw this prompt, and a's files are not in b's index
    assert b.metric("lmcache:num_hit_tokens_total") == 0
    assert "kvgate_sim:tier_read_bytes_total{" not in b.metrics()  # not one byte read from the tier
    _wait_stored(b, 2048)  # b stores the chunks again (same file names)


def test_recompute_arm_without_connector_never_touches_disk(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    s = sim(*KV_ARGS, env=_disk_env(tmp_path, disk))  # LMCACHE_CONFIG_FILE set, no kv connector
    prompt = words(1024, "r")
    s.ttft(prompt)
    _evict(s)
    assert s.ttft(prompt) >= 0.1  # recomputed: 1024 / 10000 tok/s
    assert not disk.exists() or not list(disk.iterdir())
    assert "vllm:external_prefix_cache_queries_total" in s.metrics()
    assert s.metric("vllm:external_prefix_cache_queries_total") == 0
    assert "no LMCache kv_connector" in s.log()


def test_disk_tier_size_is_respected(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    disk = tmp_path / "small"
    # 0.02 GiB = 20.5 MiB: room for 5 chunks of 4 MiB
    s = sim(
        "--kv-transfer-config",
        CONNECTOR,
        *KV_ARGS,
        env={
            "LMCACHE_CONFIG_FILE": str(
                lmcache_yaml(tmp_path / "l.yaml", local_disk=f"file://{disk}", max_local_disk_size=0.02)
            )
        },
    )
    # each request's stores land before the next is sent: stores submitted while earlier ones are
    # still being written, with no room left for them, are skipped (as LMCache skips them; tested in
    # tests/sim/test_sim_tiers.py), and beside a CPU hog one was, leaving 6 evictions, not 7
    for i in range(3):
        s.ttft(words(1024, f"e{i}-"))
        _wait_stored(s, (i + 1) * 1024)
    files = list(disk.glob("*.kvchunk"))
    assert len(files) == 5
    assert sum(p.stat().st_size for p in files) <= 0.02 * 2**30
    assert s.metric("kvgate_sim:evicted_chunks_total") == 7


def test_full_disk_is_reported_and_the_server_keeps_serving(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a 1 MiB tmpfs as a full disk")
    full = tmp_path / "full"
    full.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(full)], capture_output=True)  # noqa: S603 - fixed argv, test code
    if r.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {r.stderr.decode().strip()}")
    try:
        s = sim(
            "--kv-transfer-config",
            CONNECTOR,
            *KV_ARGS,
            env={
                "LMCACHE_CONFIG_FILE": str(
                    lmcache_yaml(tmp_path / "l.yaml", local_disk=f"file://{full}", max_local_disk_size=10)
                )
            },
        )
        prompt = words(1024, "f")
        s.ttft(prompt)
        import time

        deadline = time.monotonic() + 10
        # the error counter has no sample until the write-behind fails: wait for it to appear
        while "kvgate_sim:store_errors_total{" not in s.metrics() or s.metric("kvgate_sim:store_errors_total") < 1:
            assert time.monotonic() < deadline, s.log()
            time.sleep(0.02)
        assert 'reason="ENOSPC"' in s.metrics()
        assert "ENOSPC" in s.log()
        _evict(s)
        assert s.ttft(prompt) >= 0.1  # served again, as a recompute
        assert s.proc.poll() is None
        assert re.search(r'read_mode_info\{[^}]*mode="(odirect|fadvise)"\} 1', s.metrics())
        assert s.stop() == 0  # drains the write-behind, then exits cleanly
        assert not list(full.glob("*.tmp"))  # no torn temp files left behind
    finally:
        for p in list(full.iterdir()):
            p.unlink()
        subprocess.run(["umount", str(full)], check=False)  # noqa: S603 - fixed argv, test code


@pytest.mark.parametrize(
    ("path", "body", "status", "fragment"),
    [
        ("/v1/completions", b"not json", 400, "not valid JSON"),
        ("/v1/completions", b"[1, 2]", 400, "JSON object"),
        ("/v1/completions", json.dumps({"max_tokens": 3}).encode(), 400, "'prompt' is required"),
        ("/v1/completions", json.dumps({"prompt": "a", "max_tokens": -1}).encode(), 400, "max_tokens"),
        ("/v1/completions", json.dumps({"prompt": "a", "model": "nope"}).encode(), 404, "does not exist"),
        (
            "/v1/completions",
            json.dumps({"prompt": words(200, "x"), "max_tokens": 100}).encode(),
            400,
            "maximum context length",
        ),
        ("/v1/chat/completions", json.dumps({"messages": "hi"}).encode(), 400, "'messages'"),
        ("/v1/chat/completions", json.dumps({"messages": [{"content": "x"}]}).encode(), 400, "role"),
        ("/v1/nope", b"{}", 404, "no route"),
    ],
)
def test_malformed_requests_get_openai_errors(
    sim: Callable[..., SimProc], path: str, body: bytes, status: int, fragment: str
) -> None:
    s = sim("--max-model-len", "256")
    got, raw, _ = s.request("POST", path, raw=body)
    assert got == status
    err = json.loads(raw)["error"]
    assert fragment in err["message"]
    assert err["code"] == status
    assert err["type"] in ("BadRequestError", "NotFoundError")
    assert s.request("GET", "/health")[0] == 200  # still up


def test_api_surface_models_chat_nonstreaming_request_ids(sim: Callable[..., SimProc]) -> None:
    s = sim("--served-model-name", "m1", "m2", "--decode-tokens-per-s", "5000", "--max-model-len", "4096")
    status, body, _ = s.request("GET", "/v1/models")
    models = json.loads(body)
    assert status == 200 and [m["id"] for m in models["data"]] == ["m1", "m2"]
    assert models["data"][0]["max_model_len"] == 4096
    status, body, hdrs = s.request(
        "POST",
        "/v1/completions",
        {"model": "m2", "prompt": "a b c", "max_tokens": 5},
        headers={"x-request-id": "req-42"},
    )
    out = json.loads(body)
    assert status == 200 and out["usage"] == {"prompt_tokens": 3, "total_tokens": 8, "completion_tokens": 5}
    assert len(out["choices"][0]["text"].split()) == 5 and hdrs["x-request-id"] == "req-42"
    status, body, _ = s.request(
        "POST",
        "/v1/chat/completions",
        {"model": "m1", "messages": [{"role": "user", "content": [{"type": "text", "text": "x y"}]}]},
    )
    assert json.loads(body)["choices"][0]["message"]["role"] == "assistant"
    assert s.ttft("hello world", chat=True, max_tokens=3, request_id="chat-7") > 0
    assert "request req-42 POST /v1/completions 200" in s.wait_log("request chat-7 POST /v1/chat/completions 200")


def test_bounded_batch_queues_requests(sim: Callable[..., SimProc]) -> None:
    # 1 slot, each request decodes 200 tokens at 100 tok/s = 2 s. The first is running before the
    # other two are sent, so both must wait while it decodes: the overlap is made by the order of
    # events, not by three threads starting together (on a loaded machine they did not: CI saw at
    # most one waiting when the first 0.4 s request ended before the third arrived).
    s = sim("--max-batch", "1", "--decode-tokens-per-s", "100")
    results: list[float] = []

    def send() -> threading.Thread:
        t = threading.Thread(target=lambda: results.append(s.ttft("a b c", max_tokens=200)))
        t.start()
        return t

    threads = [send()]
    wait_for(lambda: s.metric("vllm:num_requests_running") == 1, HANG_GUARD_S, "the first request to run", poll=0.01)
    threads += [send(), send()]
    seen_waiting = 0.0

    def both_waiting() -> bool:
        nonlocal seen_waiting
        seen_waiting = max(seen_waiting, s.metric("vllm:num_requests_waiting"))
        return seen_waiting >= 2 or len(results) == 3

    wait_for(both_waiting, HANG_GUARD_S, "two requests waiting, or all three served", poll=0.01)
    for t in threads:
        t.join()
    assert seen_waiting == 2
    # the last served waited at least for the whole decode of the one before it (199 steps of 10 ms
    # after its first token); a client's stamps only add
    assert max(results) >= 1.99


def test_keepalive_connection_serves_several_requests(sim: Callable[..., SimProc]) -> None:
    import http.client

    s = sim()
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    try:
        for _ in range(3):
            conn.request("GET", "/health")
            r = conn.getresponse()
            r.read()
            assert r.status == 200 and r.getheader("connection") == "keep-alive"
    finally:
        conn.close()


def _run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(  # noqa: S603 - fixed argv, test code
        [sys.executable, "-m", "harness.sim.cli", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=20,
        cwd=str(REPO),
    )


def test_bad_command_lines_and_configs_exit_2_with_a_message(tmp_path: Path) -> None:
    r = _run_cli("serve", "m", "--kv-transfer-config", "{oops")
    assert r.returncode == 2 and "--kv-transfer-config is not valid JSON" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("chunk_size: 256\nlocal_disk: s3://bucket\n")
    r = _run_cli("serve", "m", "--kv-transfer-config", CONNECTOR, env={"LMCACHE_CONFIG_FILE": str(bad)})
    assert r.returncode == 2 and "local_disk: expected a file:// URL" in r.stderr
    r = _run_cli("serve", "m", "--kv-scale", "2")
    assert r.returncode == 2 and "--kv-scale" in r.stderr
    r = _run_cli("serve", "--help")
    assert r.returncode == 0 and "--prefill-tokens-per-s" in r.stdout


def test_port_in_use_exits_4(sim: Callable[..., SimProc]) -> None:
    s = sim()
    r = _run_cli("serve", "m", "--port", str(s.port))
    assert r.returncode == 4 and "cannot listen" in r.stderr


def test_unknown_vllm_flags_are_logged_and_ignored(sim: Callable[..., SimProc]) -> None:
    s = sim(
        "--tensor-parallel-size",
        "8",
        "--enforce-eager",
        "--swap-space",
        "16",
        "--gpu-memory-utilization",
        "0.9",
    )
    assert "ignoring vLLM arguments the emulator does not model: --enforce-eager --swap-space 16" in s.log()


def test_sigterm_stops_cleanly(sim: Callable[..., SimProc]) -> None:
    s = sim()
    assert s.stop() == 0
    assert "Shutting down" in s.log()


def test_errno_name_for_enospc_is_known() -> None:
    assert errno.errorcode[errno.ENOSPC] == "ENOSPC"


def test_cpu_tier_then_remote_directory_tier(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    cfg = lmcache_yaml(
        tmp_path / "l.yaml",
        chunk_size=256,
        local_cpu=True,
        max_local_cpu_size=1,
        remote_url=f"fs://{remote}",
        remote_serde="naive",
    )
    s = sim("--kv-transfer-config", CONNECTOR, *KV_ARGS, env={"LMCACHE_CONFIG_FILE": str(cfg)})
    prompt = words(1024, "c")
    s.ttft(prompt)
    _wait_stored(s, 1024)
    assert len(list(remote.glob("*.kvchunk"))) == 4
    assert s.request("POST", "/kvgate/evict", {"tiers": ["hbm"]})[0] == 200
    s.ttft(prompt)  # HBM dropped, the CPU tier still holds the chunks
    assert s.metric('kvgate_sim:chunk_hits_total{engine="0",model_name="test/model",tier="local_cpu"}') == 4
    assert "kvgate_sim:tier_read_bytes_total{" not in s.metrics()  # nothing read from a directory yet
    assert _evict(s) == {"hbm": 4, "local_cpu": 4}  # a restart-like evict drops both in-process tiers
    s.ttft(prompt)
    assert s.metric('kvgate_sim:chunk_hits_total{engine="0",model_name="test/model",tier="remote"}') == 4
    assert s.metric("kvgate_sim:tier_read_bytes_total") == 4 * 4 * 2**20
    status, body, _ = s.request("POST", "/kvgate/evict", {"tiers": ["disk"]})
    assert status == 400 and "tiers" in json.loads(body)["error"]["message"]


def test_a_file_url_remote_tier_is_no_tier_as_in_lmcache(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    """lmcache 0.5.6 parses fs://, not file://: its RemoteBackend logs the failed connection and runs
    without the tier. The emulator served restores from such a directory."""
    remote = tmp_path / "remote"
    cfg = lmcache_yaml(tmp_path / "l.yaml", chunk_size=256, local_cpu=True, max_local_cpu_size=1,
                       remote_url=f"file://{remote}")
    s = sim("--kv-transfer-config", CONNECTOR, *KV_ARGS, env={"LMCACHE_CONFIG_FILE": str(cfg)})
    prompt = words(1024, "f")
    s.ttft(prompt)
    _wait_stored(s, 1024)  # into the CPU tier, the only one there is
    _evict(s)
    s.ttft(prompt)
    assert not remote.exists() or not list(remote.iterdir())
    assert 'tier="remote"' not in s.metrics()
    assert f"Failed to initialize/re-establish remote connection: No adapter found for URL: file://{remote}" in s.log()


def _oldest_python() -> str | None:
    for cand in (os.path.expanduser("~/.pyenv/versions/3.9.18/bin/python3.9"), "/usr/bin/python3.9"):
        if os.access(cand, os.X_OK):
            r = subprocess.run(  # noqa: S603
                [cand, "-c", "import sys; print(sys.version_info[:2])"],
                capture_output=True,
                text=True,
            )
            if r.returncode == 0 and r.stdout.strip() == "(3, 9)":
                return cand
    return None


def test_runs_on_python_3_9(tmp_path: Path) -> None:
    """Nodes may only have Python 3.9: the emulator (stdlib only) must run there too."""
    py39 = _oldest_python()
    if py39 is None:
        pytest.skip("no Python 3.9 interpreter on this machine")
    s = start_sim(
        tmp_path,
        args=["--kv-transfer-config", CONNECTOR, *KV_ARGS],
        env=_disk_env(tmp_path, tmp_path / "d"),
        python=py39,
    )
    try:
        prompt = words(512, "old")
        s.ttft(prompt)
        _wait_stored(s, 512)
        _evict(s)
        s.ttft(prompt, chat=False)
        assert s.metric("lmcache:num_hit_tokens_total") == 512
    finally:
        assert s.stop() == 0


def test_client_disconnect_mid_stream_frees_the_slot(sim: Callable[..., SimProc]) -> None:
    import socket
    import time

    s = sim("--max-batch", "1", "--decode-tokens-per-s", "20")
    body = json.dumps({"prompt": "a b c", "max_tokens": 200, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nX-Request-Id: gone-1\r\n\r\n%s" % (len(body), body)
        )
        got = b""
        while b"data: " not in got:  # streaming has started; then the client vanishes
            chunk = sock.recv(65536)
            assert chunk, got
            got += chunk
    deadline = time.monotonic() + 5
    while s.metric("vllm:num_requests_running") != 0:
        assert time.monotonic() < deadline, s.log()
        time.sleep(0.05)
    assert s.ttft("d e f", max_tokens=2) < 1.0  # the only slot is free again
    assert "request gone-1 POST /v1/completions: client disconnected" in s.wait_log("gone-1 POST")


def _completion_text(s: SimProc, prompt: str, n: int = 16) -> str:
    status, body, _ = s.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": n,
                                                            "temperature": 0})
    assert status == 200, body
    return str(json.loads(body)["choices"][0]["text"])


def test_output_follows_the_kv_bytes_read_so_a_corrupted_chunk_changes_the_answer(
        sim: Callable[..., SimProc], tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    s = sim("--kv-transfer-config", CONNECTOR, *KV_ARGS, env=_disk_env(tmp_path, disk))
    recompute = sim(*KV_ARGS, name="recompute")  # no connector: every prompt is recomputed
    prompt, other = words(1024, "o"), words(1024, "x")
    reference = _completion_text(recompute, prompt)
    assert _completion_text(recompute, other) != reference  # the answer depends on the prompt
    assert _completion_text(s, prompt) == reference  # computed, then stored
    _wait_stored(s, 1024)
    _evict(s)
    assert _completion_text(s, prompt) == reference  # read back intact: the same answer
    assert s.metric("lmcache:num_hit_tokens_total") == 1024
    # flip bytes in the body of one stored chunk (its header, which names the chunk, is kept)
    victim = sorted(disk.glob("*.kvchunk"))[0]
    data = bytearray(victim.read_bytes())
    for i in range(8192, 8192 + 64):
        data[i] ^= 0xFF
    victim.write_bytes(bytes(data))
    _evict(s)
    corrupted = _completion_text(s, prompt)
    assert s.metric("lmcache:num_hit_tokens_total") == 2048  # served from the tier again, faster than recompute
    assert corrupted != reference  # ... and wrong
def test_lmcache_metrics_only_with_multiprocess_prometheus(sim: Callable[..., SimProc], tmp_path: Path) -> None:
    # vLLM v1 shows LMCache's in-process metrics only with PROMETHEUS_MULTIPROC_DIR; nor does the emulator
    env = {**_disk_env(tmp_path, tmp_path / "d"), "PROMETHEUS_MULTIPROC_DIR": ""}
    s = sim("--kv-transfer-config", CONNECTOR, *KV_ARGS, env=env)
    s.ttft(words(512, "m"))
    text = s.metrics()
    assert "lmcache:" not in text
    assert "vllm:external_prefix_cache_hits_total{" in text  # vLLM's own connector counters stay
