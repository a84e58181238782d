"""Finding 5: secrets leak.

A block-scalar passphrase appeared unmasked in campaign.json; ``--api-key`` in ``extra_args``
reached campaign.json, engine stderr evidence, the node's plan.json and ``ps``; ``HF_TOKEN`` reached
plan.json (0644) and ``ps``; a quoted ``"DB_PASSWORD"`` key was not masked; non-secrets such as
``--prefill-tokens-per-s`` were masked. Now: one rule on names, masking in the parsed YAML tree,
``--api-key`` moved to ``VLLM_API_KEY``, the environment handed to the launcher on stdin, plan
files 0600 and masked, engine logs masked. This test starts a real engine, samples ``ps``
throughout and greps every file written, on the node and in the evidence: zero hits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.config.profile import Profile
from harness.engines import get_engine
from harness.ports import free_port
from harness.redact import redact_data
from harness.remote.local import LocalExecutor
from harness.store.campaign import Campaign, GateDir
from tests.engines.test_lifecycle import _node, _profile
from tests.pipelines.conftest import small_profile
from tests.support.background import Background
from tests.support.procs import HANG_GUARD_S

API_KEY = "sk-kvgate-API-0123456789"
HF = "hf_kvgateTOKEN0123456789"
DB = "dbpass-kvgate-0123456789"
PASS = "hunter2-kvgate-passphrase"
SECRETS = (API_KEY, HF, DB, PASS)


def _grep(root: Path) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            hits += [f"{p}: {s}" for s in SECRETS if s.encode() in data]
    return hits


def test_campaign_json_masks_block_scalars_quoted_keys_and_argv_but_not_non_secrets(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "cluster: c\ndefaults:\n  passphrase: >-\n    " + PASS + "\n    continued\n"
        "nodes:\n  - {name: n1, host: localhost, connection: local}\n"
    )
    prof = tmp_path / "prof.yaml"
    prof.write_text(
        "name: p\nengine:\n  kind: sim\n  extra_args: [--api-key, " + API_KEY + ", --prefill-tokens-per-s, '500']\n"
        "  env:\n    \"DB_PASSWORD\": " + DB + "\n    HF_TOKEN: " + HF + "\n    MODEL_DIR: /m\n"
    )
    with Campaign.open(tmp_path / "reports", "c1", inventory_path=inv, profile_path=prof):
        pass
    text = (tmp_path / "reports" / "c1" / "campaign.json").read_text()
    assert not [s for s in SECRETS if s in text]
    meta = json.loads(text)
    assert "continued" not in meta["inventory"]["text"]
    assert "--prefill-tokens-per-s, '500'" in meta["profile"]["text"] and "MODEL_DIR: /m" in meta["profile"]["text"]


def test_engine_secrets_never_in_ps_plan_files_or_logs(tmp_path: Path) -> None:
    port = free_port()
    profile: Profile = _profile(tmp_path, kind="sim", command=None, port=port,
                                extra=["--api-key", API_KEY], env={"HF_TOKEN": HF, "DB_PASSWORD": DB})
    node = _node(tmp_path)
    (tmp_path / "tier").mkdir()
    engine = get_engine("sim")
    workdir = tmp_path / "w"
    plan = engine.plan(node, profile, "disk", 0, workdir=str(workdir), python=sys.executable)
    assert API_KEY not in plan.argv and plan.env["VLLM_API_KEY"] == API_KEY
    assert any("VLLM_API_KEY" in n for n in plan.notes)
    seen: list[str] = []

    def sample(stop: threading.Event) -> None:
        while not stop.is_set():
            out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            seen.append(out)
            stop.wait(0.01)

    evidence = tmp_path / "evidence"
    with Background(sample, name="ps-sampler"), LocalExecutor("local") as ex:
        inst = engine.start(ex, plan)
        try:
            engine.wait_ready(inst, 20)
            environ = Path(f"/proc/{inst.handle.pid}/environ").read_bytes()
            assert f"HF_TOKEN={HF}".encode() in environ  # the engine did get its secrets
            engine.collect_logs(inst, evidence)
        finally:
            engine.stop(inst, remove_kv_files=True)
    assert len(seen) > 5
    assert not [s for s in SECRETS for snap in seen if s in snap], "a secret appeared in ps"
    node_plan = Path(plan.instance_dir) / "plan.json"
    assert node_plan.stat().st_mode & 0o777 == 0o600
    assert _grep(workdir) == [] and _grep(evidence) == []


@pytest.mark.slow
def test_g1_g2_with_secrets_everywhere_leave_no_trace(tmp_path: Path, local_inventory: Path,
                                                      write_yaml: Callable[[str, dict[str, Any]], Path]) -> None:
    """G1 and G2 with secrets in every supported place (inventory passphrase as a block scalar,
    engine env HF_TOKEN and a quoted DB_PASSWORD, --api-key in extra_args, the client's key by
    env): ``ps`` is sampled throughout and every file written, in the reports and in the node
    workdir, is grepped: zero hits."""
    inv_text = local_inventory.read_text().replace(
        "defaults:\n", "defaults:\n  passphrase: >-\n    " + PASS + "\n", 1)
    local_inventory.write_text(inv_text)
    data = small_profile(free_port())
    data["engine"]["extra_args"] = ["--api-key", API_KEY]
    data["engine"]["env"] = {"HF_TOKEN": HF, "DB_PASSWORD": DB}
    data["engine"]["api_key_env"] = "KVGATE_TEST_API_KEY"
    data["load"]["repetitions"] = 2
    prof = write_yaml("profile.yaml", data)
    reports = tmp_path / "reports"
    seen: list[str] = []

    def sample(stop: threading.Event) -> None:
        while not stop.is_set():
            seen.append(subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout)
            stop.wait(0.05)

    env = {**os.environ, "KVGATE_TEST_API_KEY": API_KEY}
    with Background(sample, name="ps-sampler"):
        for g in ("G1", "G2"):
            proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "gate", g, "--inventory",  # noqa: S603
                                   str(local_inventory), "--profile", str(prof), "--campaign", "s", "--reports",
                                   str(reports), "--no-progress"], capture_output=True, text=True, env=env,
                                  timeout=600)
            assert proc.returncode in (0, 1), proc.stderr[-2000:]
            assert not [s for s in SECRETS if s in proc.stdout + proc.stderr]
    assert len(seen) > 20
    assert not [s for s in SECRETS for snap in seen if s in snap], "a secret appeared in ps"
    assert _grep(reports) == []
    assert _grep(tmp_path / "work") == []
    assert (reports / "s" / "G2" / "evidence" / "commands.jsonl").exists()


# --- round three (#29 item 3): one case per variant the red team found ------------------------------

URL_PW = "urlpw-kvgate-0123456789"
PG_PW = "pgpass-kvgate-0123456789"
HF_CAMEL = "hf_camelTOKEN0123456789"
AUTH = "remoteauth-kvgate-0123456789"
ACCOUNT = "accountkey-kvgate-0123456789=="
BEARER = "sk-bearer-kvgate-0123456789"
COMMENTED = "sk-commented-kvgate-0123456789"
QUERY_PW = "querypw-kvgate-0123456789"
ROUND3 = (URL_PW, PG_PW, HF_CAMEL, AUTH, ACCOUNT, BEARER, COMMENTED, QUERY_PW)

ROUND3_PROFILE = f"""name: p
# api_key: {COMMENTED}
engine:
  kind: sim
  extra_args: [--hfToken, {HF_CAMEL}, --headers, '{{"Authorization":"Bearer {BEARER}"}}']  # {COMMENTED}
  env:
    PGPASSWORD: {PG_PW}
    DB_URL: postgresql://u:{URL_PW}@db/x?sslpassword={QUERY_PW}
    BLOB: DefaultEndpointsProtocol=https;AccountName=a;AccountKey={ACCOUNT};EndpointSuffix=x
arms:
  - name: disk
    lmcache:
      remote_url: "redis://:{URL_PW}@h:6379"
      extra_config: {{remote_auth: {AUTH}}}
"""


@pytest.mark.parametrize("secret", ROUND3)
def test_round3_variant_never_reaches_campaign_json(tmp_path: Path, secret: str) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("cluster: c\nnodes:\n  - {name: n1, host: localhost, connection: local}\n")
    prof = tmp_path / "prof.yaml"
    prof.write_text(ROUND3_PROFILE)
    with Campaign.open(tmp_path / "reports", "c1", inventory_path=inv, profile_path=prof):
        pass
    text = (tmp_path / "reports" / "c1" / "campaign.json").read_text()
    assert secret not in text
    stored = json.loads(text)["profile"]["text"]
    assert "#" not in stored  # comments are dropped, not kept
    assert "postgresql://u:***@db/x" in stored and "AccountName=a" in stored  # what is not secret stays


@pytest.mark.parametrize(("argv", "secret"), [
    (["redis-cli", "-u", f"redis://:{URL_PW}@h"], URL_PW),
    (["psql", f"postgresql://u:{URL_PW}@db/x"], URL_PW),
    (["env", f"PGPASSWORD={PG_PW}", "psql"], PG_PW),
    (["vllm", "serve", "m", "--hfToken", HF_CAMEL], HF_CAMEL),
    (["vllm", "serve", "m", f"--hfToken={HF_CAMEL}"], HF_CAMEL),
    (["tool", f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={ACCOUNT}"], ACCOUNT),
    (["vllm", "--headers", f'{{"Authorization":"Bearer {BEARER}"}}'], BEARER),
    (["curl", "-H", f"Authorization: Bearer {BEARER}"], BEARER),
    (["psql", f"postgresql://u@db/x?password={QUERY_PW}"], QUERY_PW),
    (["psql", f"host=db sslpassword={QUERY_PW}"], QUERY_PW),
])
def test_round3_variant_never_reaches_commands_jsonl(tmp_path: Path, argv: list[str], secret: str) -> None:
    gate = GateDir(tmp_path / "G1", "G1")
    gate.record_command("n1", argv)
    text = (gate.evidence / "commands.jsonl").read_text()
    assert secret not in text and argv[0] in text


def test_round3_plan_output_masks_remote_auth_and_url_passwords() -> None:
    """``kvgate plan`` prints redact_data(plan): the LMCache YAML text a plan carries and the env."""
    plan = {"env": {"PGPASSWORD": PG_PW, "hfToken": HF_CAMEL, "DSN": f"redis://:{URL_PW}@h"},
            "files": {"/w/lmcache.yaml": f"chunk_size: 256\nremote_url: redis://:{URL_PW}@h\n"
                                         f"extra_config:\n  remote_auth: {AUTH}\n"},
            "argv": ["vllm", "--headers", f'{{"Authorization":"Bearer {BEARER}"}}']}
    text = json.dumps(redact_data(plan))
    assert [s for s in ROUND3 if s in text] == []
    assert "chunk_size: 256" in text


def test_round3_history_url_query_password_is_masked_and_warned(tmp_path: Path) -> None:
    url = f"postgresql://kv@127.0.0.1:1/x?password={QUERY_PW}&sslpassword={QUERY_PW}"
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "history", "list",  # noqa: S603
                           "--history", url], capture_output=True, text=True, cwd=tmp_path, timeout=HANG_GUARD_S)
    assert proc.returncode in (2, 4), proc.stderr
    assert QUERY_PW not in proc.stdout + proc.stderr
    assert "carries a password" in proc.stderr
