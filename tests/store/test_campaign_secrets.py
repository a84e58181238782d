"""Secrets written inline in an inventory or profile never reach the campaign directory."""

from __future__ import annotations

import json
from pathlib import Path

from harness.redact import redact_config_text
from harness.store.campaign import Campaign


def test_inline_secrets_are_masked_in_campaign_json(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("cluster: c\ndefaults: {passphrase: hunter2-secret, passphrase_env: KVGATE_PASS}\n"
                   "nodes:\n  - {name: a, host: h}\n")
    prof = tmp_path / "prof.yaml"
    prof.write_text("name: p\nengine:\n  kind: sim\n  env: {HF_TOKEN: hf_secret_value}\n  api_key_env: KEYVAR\n")
    with Campaign.open(tmp_path / "reports", "c1", inventory_path=inv, profile_path=prof):
        pass
    text = (tmp_path / "reports" / "c1" / "campaign.json").read_text()
    assert "hunter2-secret" not in text and "hf_secret_value" not in text
    meta = json.loads(text)
    assert "passphrase_env: KVGATE_PASS" in meta["inventory"]["text"]  # where a secret is: kept
    assert "api_key_env: KEYVAR" in meta["profile"]["text"]
    # resuming with the same files is still recognised by their hash
    with Campaign.open(tmp_path / "reports", "c1", inventory_path=inv, profile_path=prof) as again:
        assert again.resumed


def test_redaction_keeps_the_rest_of_the_line() -> None:
    assert redact_config_text("  api_key: \"sk-1 2\"  # note\n") == "  api_key: '***'  # note\n"
    assert redact_config_text("name: token-bucket\n") == "name: token-bucket\n"
