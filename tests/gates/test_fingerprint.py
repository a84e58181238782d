"""The workload fingerprint: canonical, field by field, and sensitive to what makes runs unlike."""

from __future__ import annotations

from pathlib import Path

from harness.config.loader import load_inventory, load_profile
from harness.gates.fingerprint import (
    MISSING,
    fingerprint_diff,
    fingerprint_digest,
    fingerprint_record,
    workload_fingerprint,
)

ROOT = Path(__file__).resolve().parents[2]


def _demo():  # type: ignore[no-untyped-def]
    return load_profile(ROOT / "profiles" / "demo.yaml"), load_inventory(ROOT / "inventory" / "localhost.yaml")


def test_fingerprint_names_what_makes_runs_comparable() -> None:
    prof, inv = _demo()
    fp = workload_fingerprint(prof, arm=prof.baseline, inventory=inv, engine_version="v1")
    for key in ("model.name", "model.geometry.kv_heads", "model.tensor_parallel_size", "model.instances_per_node",
                "engine.kind", "engine.version", "load.workload", "load.input_len", "load.output_len",
                "load.concurrency", "load.prompts_per_point", "load.repetitions", "load.cold_restore", "load.seed",
                "arm.name", "arm.offload", "arm.storage", "engine.sim.prefill_tokens_per_s", "nodes.platforms"):
        assert key in fp, key
    assert fp["engine.version"] == "v1" and fp["load.input_len"] == prof.load.input_len
    assert fp["nodes.platforms"] == sorted({str(n.platform) for n in inv.nodes if "server" in n.roles})
    assert not any(k.startswith(("overrides", "engine.port", "engine.env")) for k in fp)


def test_digest_is_stable_and_changes_with_any_field() -> None:
    prof, inv = _demo()
    fp = workload_fingerprint(prof, arm=prof.baseline, inventory=inv)
    again = workload_fingerprint(prof, arm=prof.baseline, inventory=inv)
    assert fingerprint_digest(fp) == fingerprint_digest(again) == fingerprint_record(fp)["digest"]
    assert len(fingerprint_digest(fp)) == 64
    assert fingerprint_digest(dict(reversed(list(fp.items())))) == fingerprint_digest(fp)  # key order is irrelevant
    shorter = prof.model_copy(update={"load": prof.load.model_copy(update={"input_len": 256})})
    fp2 = workload_fingerprint(shorter, arm=prof.baseline, inventory=inv)
    assert fingerprint_digest(fp2) != fingerprint_digest(fp)
    assert fingerprint_diff(fp, fp2) == [("load.input_len", prof.load.input_len, 256)]


def test_arms_differ_and_missing_fields_are_named() -> None:
    prof, _ = _demo()
    base = workload_fingerprint(prof, arm=prof.baseline)
    cand = workload_fingerprint(prof, arm=prof.candidate)
    changed = {k for k, _, _ in fingerprint_diff(base, cand)}
    assert "arm.name" in changed and not any(k.startswith(("load.", "model.")) for k in changed)
    assert ("nodes.platforms", MISSING, ["cpu"]) in fingerprint_diff({}, {"nodes.platforms": ["cpu"]})


PROFILE = {
    "name": "fp", "model": {"name": "m/x", "preset": "tiny", "tensor_parallel_size": 2, "instances_per_node": 3,
                            "nodes_per_instance": 1, "max_model_len": 8192},
    "engine": {"kind": "sim", "extra_args": ["--a"], "port": 1234, "env": {"SECRET": "s"},
               "sim": {"prefill_tokens_per_s": 1000, "decode_tokens_per_s": 10, "max_batch": 2, "hbm_tokens": 512,
                       "kv_scale": 0.5}},
    "arms": [{"name": "baseline", "offload": False, "description": "words"},
             {"name": "candidate", "storage": "t", "lmcache": {"chunk_size": 128, "max_local_disk_size": 3}}],
    "load": {"workload": "long-doc", "input_len": 300, "output_len": 5, "concurrency": [4, 1],
             "prompts_per_point": 9, "warmup": 1, "repetitions": 6, "seed": 4},
}


def test_every_field_and_value_is_exactly_as_documented() -> None:
    from harness.config.profile import Profile

    prof = Profile.model_validate(PROFILE)
    fp = workload_fingerprint(prof, arm="candidate", engine_version="v9")
    # every LMCache setting of the arm, whatever settings the model grows (checked by value)
    lmcache = {f"arm.lmcache.{k}": v for k, v in prof.arm("candidate").lmcache.model_dump(mode="json").items()}
    assert lmcache["arm.lmcache.chunk_size"] == 128 and lmcache["arm.lmcache.max_local_disk_size"] == 3.0
    assert fp == {
        "model.geometry.dtype_bytes": 2, "model.geometry.head_dim": 64, "model.geometry.kv_heads": 2,
        "model.geometry.latent_dim": None, "model.geometry.layers": 4, "model.instances_per_node": 3,
        "model.max_model_len": 8192, "model.name": "m/x", "model.nodes_per_instance": 1,
        "model.tensor_parallel_size": 2, "engine.extra_args": ["--a"], "engine.kind": "sim",
        "engine.sim.decode_tokens_per_s": 10.0, "engine.sim.hbm_tokens": 512, "engine.sim.kv_scale": 0.5,
        "engine.sim.max_batch": 2, "engine.sim.prefill_tokens_per_s": 1000.0, "engine.version": "v9",
        "engine.env.SECRET": "***",  # declared for the engine: it enters, its value masked
        "load.api": "completions", "load.burstiness": 1.0, "load.cold_restore": True, "load.concurrency": [1, 4],
        "load.hit_ratio": 1.0, "load.input_len": 300, "load.mode": "closed", "load.num_groups": 4,
        "load.num_rounds": 2, "load.output_len": 5, "load.prefix_len": 0, "load.prompts_per_point": 9,
        "load.range_ratio": 0.0, "load.repetitions": 6, "load.request_rate": None, "load.request_timeout": 600.0,
        "load.seed": 4, "load.trace": None, "load.ttft_slo": None, "load.warmup": 1, "load.workload": "long-doc",
        **lmcache, "arm.name": "candidate", "arm.offload": True, "arm.storage": "t",
    }
    base = workload_fingerprint(prof, arm="baseline")
    assert base["arm.lmcache"] is None and base["arm.offload"] is False and base["engine.version"] is None
    assert "arm.storage" in base and base["arm.storage"] is None
    vllm = Profile.model_validate({**PROFILE, "engine": {"kind": "vllm"}})
    assert not any(k.startswith("engine.sim") for k in workload_fingerprint(vllm, arm="candidate"))


def test_digest_is_the_sha256_of_compact_sorted_json() -> None:
    import hashlib

    fp = {"b": [2, 3], "a": 1, "c": None, "d": "é"}
    want = hashlib.sha256(b'{"a":1,"b":[2,3],"c":null,"d":"\\u00e9"}').hexdigest()
    assert fingerprint_digest(fp) == want
    assert fingerprint_record(fp) == {"digest": want, "fields": fp}


def test_diff_compares_canonically_and_lists_both_sides() -> None:
    assert fingerprint_diff({"x": [1, 2]}, {"x": [1, 2]}) == []
    assert fingerprint_diff({"x": {"b": 1, "a": 2}}, {"x": {"a": 2, "b": 1}}) == []
    assert fingerprint_diff({"x": 1, "y": 2}, {"x": 1.5, "z": 3}) == [
        ("x", 1, 1.5), ("y", 2, MISSING), ("z", MISSING, 3)]


def test_canonical_values_have_sorted_keys_and_non_json_values_as_text() -> None:
    import datetime as dt

    from harness.gates import fingerprint as f

    assert list(f._canonical({"b": 1, "a": {"d": 2, "c": 3}})) == ["a", "b"]
    assert list(f._canonical({"b": 1, "a": {"d": 2, "c": 3}})["a"]) == ["c", "d"]
    assert f._canonical(Path("/x/y")) == "/x/y" and f._canonical((1, 2)) == [1, 2]
    # the digest of a fingerprint holding a value JSON does not know is its text's digest
    assert fingerprint_digest({"k": Path("/x")}) == fingerprint_digest({"k": "/x"})
    assert fingerprint_digest({"k": dt.date(2026, 12, 1)}) == fingerprint_digest({"k": "2026-12-01"})


def test_config_models_are_dumped_as_json_values() -> None:
    import datetime as dt

    from pydantic import BaseModel

    from harness.gates import fingerprint as f

    class M(BaseModel):
        when: dt.datetime
        n: int = 1

    m = M(when=dt.datetime(2026, 12, 1, 1, 2, 3))
    assert f._dump(m) == {"when": "2026-12-01T01:02:03", "n": 1}  # ISO, not str(datetime)
    assert f._dump(m, {"n"}) == {"when": "2026-12-01T01:02:03"}


def test_platforms_are_those_of_the_serving_nodes_else_of_every_node() -> None:
    from harness.config.inventory import Inventory

    prof, inv = _demo()
    node = inv.nodes[0].model_dump()

    def inventory(*specs: tuple[str, list[str], str]) -> Inventory:
        data = inv.model_dump()
        data["nodes"] = [{**node, "name": n, "roles": roles, "platform": plat} for n, roles, plat in specs]
        return Inventory.model_validate(data)

    mixed = inventory(("s", ["server"], "mi308x"), ("c", ["client"], "cpu"), ("t", ["server", "storage"], "cuda"))
    assert workload_fingerprint(prof, arm=prof.baseline, inventory=mixed)["nodes.platforms"] == ["cuda", "mi308x"]
    no_server = inventory(("c", ["client"], "cpu"), ("t", ["storage"], "mi308x"))
    assert workload_fingerprint(prof, arm=prof.baseline, inventory=no_server)["nodes.platforms"] == ["cpu", "mi308x"]


def test_two_traces_at_one_path_are_different_workloads(tmp_path: Path) -> None:
    """A trace workload is fingerprinted by the trace's contents: rewriting the file at the same path
    makes the runs unlike (a baseline replayed another trace), and an unreadable trace never
    compares equal to a readable one."""
    prof, _ = _demo()
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 512, "output_length": 8, "hash_ids": [1]}\n')
    load = prof.load.model_copy(update={"workload": "hash-trace", "trace": str(trace)})
    first = workload_fingerprint(prof.model_copy(update={"load": load}), arm=prof.baseline)
    assert len(first["load.trace_sha256"]) == 64
    assert first["load.trace_block_size"] == 512 and "load.lru_blocks" not in first  # replay vs judgement
    trace.write_text('{"timestamp": 0, "input_length": 512, "output_length": 8, "hash_ids": [2]}\n')
    second = workload_fingerprint(prof.model_copy(update={"load": load}), arm=prof.baseline)
    assert [d[0] for d in fingerprint_diff(first, second)] == ["load.trace_sha256"]
    trace.unlink()
    gone = workload_fingerprint(prof.model_copy(update={"load": load}), arm=prof.baseline)
    assert gone["load.trace_sha256"].startswith("(unreadable:")
    assert "load.trace_sha256" not in workload_fingerprint(prof, arm=prof.baseline)  # no trace, no field


def test_declared_engine_variables_enter_the_fingerprint_with_secrets_masked() -> None:
    """Issue 33 item 4: what the profile declares is all that reaches the engine besides kvgate's
    own settings, so two runs with different declared variables are different workloads."""
    prof, inv = _demo()
    plain = workload_fingerprint(prof, arm=prof.baseline, inventory=inv)
    env = {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN", "HF_TOKEN": "hf_secret_value"}
    declared = prof.model_copy(update={"engine": prof.engine.model_copy(update={"env": env})})
    fp = workload_fingerprint(declared, arm=prof.baseline, inventory=inv)
    assert fp["engine.env.VLLM_ATTENTION_BACKEND"] == "FLASH_ATTN"
    assert "hf_secret_value" not in str(fp) and "engine.env.HF_TOKEN" in fp
    assert ("engine.env.VLLM_ATTENTION_BACKEND", MISSING, "FLASH_ATTN") in fingerprint_diff(plain, fp)
    other = declared.model_copy(update={"engine": declared.engine.model_copy(
        update={"env": {**env, "VLLM_ATTENTION_BACKEND": "TORCH_SDPA"}})})
    assert fingerprint_digest(workload_fingerprint(other, arm=prof.baseline, inventory=inv)) != fingerprint_digest(fp)
