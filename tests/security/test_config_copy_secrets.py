"""#50 item 5: secrets in the copies of the inventory and profile a campaign keeps (campaign.json).

The red team's round four: ``mask_secret_values`` masked 28 of 33 hostile cases and leaked a
secret under a ``? [KEY]`` complex key, the value of a short ``-k`` flag, a secret inside a nested
map (an environment list's ``value:`` beside ``name: HF_TOKEN``), and two command lines written as
one string. Each leak is a case here (each leaked on db6afdf), beside variants that already held,
all through ``Campaign.open``, the path that writes the copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config.yamlsource import mask_secret_values
from harness.store.campaign import Campaign

LEAKED = {
    "complex key (flow)": ("? [HF_TOKEN]\n: hf_leak_complex_0123456789\n", "hf_leak_complex_0123456789"),
    "complex key (block)": ("? - api_key\n: leak-complex-block-0123456789\n", "leak-complex-block-0123456789"),
    "short -k flag (flow list)": ("args: [bench, -k, leak-short-k-0123456789, --port, '8000']\n",
                                  "leak-short-k-0123456789"),
    "short -k flag (block list)": ("args:\n  - bench\n  - -k\n  - leak-short-kb-0123456789\n",
                                   "leak-short-kb-0123456789"),
    "nested map (env list)": ("engine:\n  env:\n    - name: HF_TOKEN\n      value: leak-nested-0123456789\n"
                              "    - name: PORT\n      value: '8000'\n", "leak-nested-0123456789"),
    "command line as one string": ('command: "vllm serve m --api-key leak-cmd-0123456789 --port 8000"\n',
                                   "leak-cmd-0123456789"),
    "command line with -k and --token=": ("cmd: curl -k leak-cmd-k-0123456789 --token=leak-cmd-t-0123456789 x\n",
                                          "leak-cmd-k-0123456789"),
    "command line (block scalar)": ("run: |\n  vllm serve m \\\n    --password leak-cmd-block-0123456789 \\\n"
                                    "    --port 1\n", "leak-cmd-block-0123456789"),
}
HELD = {
    "a key at depth": ("a:\n  b:\n    c:\n      password: held-deep-0123456789\n", "held-deep-0123456789"),
    "flow mapping": ("x: {api_key: held-flow-0123456789, y: 2}\n", "held-flow-0123456789"),
    "argument list": ("args: [--api-key, held-argv-0123456789]\n", "held-argv-0123456789"),
    "NAME=value argument": ("args: [HF_TOKEN=held-assign-0123456789]\n", "held-assign-0123456789"),
    "quoted key, block scalar": ('"DB_PASSWORD": |\n  held-block-0123456789\n', "held-block-0123456789"),
    "secret map under a secret key": ("credentials:\n  user: u\n  other: held-map-0123456789\n",
                                      "held-map-0123456789"),
}


@pytest.mark.parametrize("case", [*LEAKED, *HELD])
def test_config_copies_mask_every_secret(tmp_path: Path, case: str) -> None:
    text, secret = {**LEAKED, **HELD}[case]
    inv = tmp_path / "inv.yaml"
    inv.write_text("cluster: c\nnodes:\n  - {name: n1, host: localhost, connection: local}\n")
    prof = tmp_path / "prof.yaml"
    prof.write_text("name: p\n" + text)
    with Campaign.open(tmp_path / "reports", "c1", inventory_path=inv, profile_path=prof):
        pass
    stored = (tmp_path / "reports" / "c1" / "campaign.json").read_text()
    assert secret not in stored
    assert json.loads(stored)["profile"]["text"].startswith("name: p\n")  # the copy was kept (masked)


def test_command_line_masking_keeps_what_is_not_secret() -> None:
    out = mask_secret_values('command: "vllm serve m --api-key sk-0123456789 --port 8000 --max-num-seqs 4"\n'
                             "args: [serve, -k, kk-0123456789, --port, '8000']\n"
                             "env:\n  - {name: PORT, value: '8000'}\n  - {name: HF_TOKEN, value: hf-0123456789}\n")
    assert "sk-0123456789" not in out and "kk-0123456789" not in out and "hf-0123456789" not in out
    assert "vllm serve m --api-key *** --port 8000 --max-num-seqs 4" in out
    assert "--port, '8000'" in out and "{name: PORT, value: '8000'}" in out
