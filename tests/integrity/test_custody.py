"""Chain of custody (issue 27), end to end through the CLI: a G3 uses a G2 baseline only when
that baseline is VERIFIED (signed by the vendor and the customer with keys trusted through
allowed_signers), pins it in result.json (campaign, gate, manifest digest, signers), and says
"unsigned baseline" everywhere when a rehearsal used one with --allow-unsigned-baseline.

Keys are made with the real ssh-keygen; the baseline is the session's one real G1+G2 campaign
(tests/support/campaign.py), copied per test."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness.report.manifest import compute, manifest_text, scan
from harness.report.sign import write_manifest
from tests.integrity.test_false_pass import FROM_BASE, Base, gate_argv, kvgate, result
from tests.support.campaign import PassedBaseline
from tests.support.signing import cli, ssh_key

pytestmark = [pytest.mark.fio, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def base(tmp_path: Path, passed_baseline: PassedBaseline) -> Base:
    return Base(tmp_path / "custody", passed_baseline)


def _sign_both(capsys: pytest.CaptureFixture[str], gate_dir: Path, tmp: Path,
               customer_role: str = "customer") -> Path:
    """Sign ``gate_dir`` as vendor and customer with fresh keys; return an allowed_signers file
    binding the vendor key to vendor and the customer key to ``customer_role``."""
    vendor, customer = ssh_key(tmp, "vendor"), ssh_key(tmp, "customer")
    assert cli(capsys, "sign", str(gate_dir), "--key", str(vendor), "--signer", "Vera", "--role", "vendor")[0] == 0
    assert cli(capsys, "sign", str(gate_dir), "--key", str(customer), "--signer", "Carl",
                  "--role", "customer")[0] == 0
    allowed = tmp / "allowed_signers"
    allowed.write_text(f"vera@vendor {Path(str(vendor) + '.pub').read_text().strip()}\n"
                       f"carl@{customer_role} {Path(str(customer) + '.pub').read_text().strip()}\n")
    return allowed


def _tamper_consistently(g2: Path) -> None:
    """Slow the baseline down 3x in its recorded state and regenerate MANIFEST.sha256 as
    sha256sum would: every file then matches its manifest (the issue's first scenario)."""
    state = g2 / "state.jsonl"
    lines = [json.loads(x) for x in state.read_text().splitlines()]
    for rec in lines:
        data = rec.get("data")
        if isinstance(data, dict) and isinstance(data.get("ttft_ms"), list):
            data["ttft_ms"] = [t * 3 for t in data["ttft_ms"]]
    state.write_text("".join(json.dumps(r) + "\n" for r in lines))
    (g2 / "MANIFEST.sha256").write_text(manifest_text(compute(g2, scan(g2).files)))


def test_tampered_unsigned_baseline_is_refused(base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(base.reports / "base", base.reports / "tampered")
    _tamper_consistently(base.reports / "tampered" / "G2")
    code, out = cli(capsys, "verify", str(base.reports / "tampered" / "G2"))
    assert code != 0  # the manifest matches, but nobody signed it
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, base.campaign("t3"),
                                          "--baseline", "tampered"))
    assert code == 2, out
    assert "is not VERIFIED" in out and "carries no signature" in out and "--allow-unsigned-baseline" in out
    assert not (base.reports / "t3" / "G3").exists()


def test_baseline_signed_by_one_role_or_untrusted_keys_is_refused(
        base: Base, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g2 = base.reports / "base" / "G2"
    # the customer's key is trusted only as a vendor: the customer role is not satisfied
    allowed = _sign_both(capsys, g2, tmp_path, customer_role="vendor")
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, base.campaign("c"),
                                          "--baseline", "base",
                                          "--allowed-signers", str(allowed)))
    assert code == 2, out
    assert "no signature of the customer by a key trusted for it" in out
    # signed, but no trust file given at all
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, base.campaign("c"),
                                          "--baseline", "base"))
    assert code == 2 and "no trust anchors were given" in out, out
    assert not (base.reports / "c" / "G3").exists()


def test_verified_baseline_is_pinned_and_verify_rechecks_it(
        base: Base, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g2 = base.reports / "base" / "G2"
    allowed = _sign_both(capsys, g2, tmp_path)
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, base.campaign("cand"),
                                          "--baseline", "base",
                                          "--allowed-signers", str(allowed)))
    res = result(base.reports, "cand", "G3")
    # the verdict is the measurement's (fio's steady state may be INCONCLUSIVE on a loaded machine);
    # what is checked here is that G3 ran against the verified baseline and pinned it
    assert code in (0, 3) and res["verdict"] in ("PASS", "INCONCLUSIVE"), out
    b = res["baseline"]
    assert b["campaign"] == "base" and b["gate"] == "G2" and b["verified"] is True
    assert b["unsigned_baseline"] is False
    assert b["manifest_sha256"] == hashlib.sha256((g2 / "MANIFEST.sha256").read_bytes()).hexdigest()
    assert sorted(s["role"] for s in b["signers"]) == ["customer", "vendor"]
    assert all(s["fingerprint"].startswith("SHA256:") for s in b["signers"])
    assert "unsigned baseline" not in (base.reports / "cand" / "G3" / "report.html").read_text()
    cand = base.reports / "cand" / "G3"
    code, out = cli(capsys, "verify", str(cand))
    assert "matches the digest this gate recorded" in out
    # the baseline is changed and re-signed afterwards: it is no longer the one G3 used
    (g2 / "notes.txt").write_text("added later\n")
    shutil.rmtree(g2 / "signatures")
    (tmp_path / "again").mkdir()
    _sign_both(capsys, g2, tmp_path / "again")
    code, out = cli(capsys, "verify", str(cand))
    assert code == 1, out
    assert "is not the one this gate compared against" in out
    # the baseline is not at hand: said so
    shutil.rmtree(base.reports / "base")
    code, out = cli(capsys, "verify", str(cand))
    assert "is not at hand" in out and "was not re-checked" in out


def test_unsigned_baseline_is_labelled_everywhere(base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, base.campaign("rehearsal"),
                                          "--baseline", "base",
                                          "--allow-unsigned-baseline"))
    res = result(base.reports, "rehearsal", "G3")
    assert code in (0, 3), out  # the label does not decide the verdict: the measurement does
    assert "UNSIGNED BASELINE" in out
    b = res["baseline"]
    assert b["unsigned_baseline"] is True and b["verified"] is False and b["signers"] == []
    assert any(n.startswith("UNSIGNED BASELINE") for n in res["notes"])
    gate = base.reports / "rehearsal" / "G3"
    html = (gate / "report.html").read_text()
    notice = html.index('id="unsigned-baseline-G3"')
    assert notice < html.index('id="checks"')  # page one, before the checks
    assert "unsigned baseline" in html[notice:notice + 400]
    assert "unsigned baseline" in (gate / "report.md").read_text()
    assert 'id="unsigned-baseline-G3"' in (base.reports / "rehearsal" / "report.html").read_text()
    code, out = cli(capsys, "verify", str(gate))
    assert "LABEL    unsigned baseline" in out


def test_swapped_gate_file_is_flagged_on_page_one_with_every_difference(
        base: Base, tmp_path: Path, passed_baseline: PassedBaseline, capsys: pytest.CaptureFixture[str]) -> None:
    # the stock files the session's baseline ran with are recorded as such
    for gate in ("G1", "G2"):
        (stock,) = passed_baseline.result(gate)["gate_files"]
        assert stock["stock"] is True and stock["differences"] == [] and stock["path"].endswith(f"{gate}.yaml")
    gates = tmp_path / "gates"
    gates.mkdir()
    spec = yaml.safe_load((REPO / "gates" / "G3.yaml").read_text())
    by_id = {c["id"]: c for c in spec["checks"]}
    by_id["ttft_p50_reduction"]["threshold"] = "-100%"  # a candidate slower than the baseline passes
    by_id["throughput_gain"]["threshold"] = "-80%"
    by_id["candidate_failed_requests"]["severity"] = "advisory"
    spec["checks"] = [c for c in spec["checks"] if c["id"] != "output_identity"]
    (gates / "G3.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, base.campaign("swap"), *FROM_BASE,
                                          "--gates", str(gates)))
    assert "NON-STOCK GATE FILE" in out, out
    res = result(base.reports, "swap", "G3")
    (gf,) = res["gate_files"]
    assert gf["stock"] is False and gf["path"] == str((gates / "G3.yaml").resolve())
    assert gf["sha256"] == hashlib.sha256((gates / "G3.yaml").read_bytes()).hexdigest() != gf["stock_sha256"]
    expected = ["ttft_p50_reduction: threshold 25% -> -100%", "throughput_gain: threshold 29% -> -80%",
                "candidate_failed_requests: severity blocker -> advisory",
                "output_identity: removed (it was a blocker)"]
    texts = [d["text"] for d in gf["differences"]]
    for want in expected:
        assert any(t.startswith(want) for t in texts), (want, texts)
    assert {"blocker_demoted", "blocker_removed"} <= {d["kind"] for d in gf["differences"]}
    gate = base.reports / "swap" / "G3"
    html = (gate / "report.html").read_text()
    flag = html.index('id="nonstock-gate-file-G3"')
    assert flag < html.index('id="checks"')  # page one, before the checks
    block = html[flag:html.index("</div>", flag)]
    md = (gate / "report.md").read_text()
    for want in expected:
        assert want.replace("->", "-&gt;") in block and want in md, want
    assert 'id="nonstock-gate-file-G3"' in (base.reports / "swap" / "report.html").read_text()
    code, out = cli(capsys, "verify", str(gate))
    assert "LABEL    non-stock gate file" in out


def test_g3_in_a_campaign_without_its_own_g1_is_refused(base: Base, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, "nog1", *FROM_BASE))
    assert code == 2, out
    assert "G3 needs a passed G1 in the same campaign (campaign 'nog1')" in out
    assert not (base.reports / "nog1").exists()
    # a G1 that did not pass is not enough either
    base.campaign("failedg1")
    g1 = base.reports / "failedg1" / "G1" / "result.json"
    g1.write_text(g1.read_text().replace('"verdict": "PASS"', '"verdict": "FAIL"', 1))
    write_manifest(g1.parent)  # as a failed G1 run left it (G3 verifies G1 against its manifest first)
    code, out = kvgate(capsys, *gate_argv("G3", base.inv, base.prof, base.reports, "failedg1", *FROM_BASE))
    assert code == 2 and "G1 there is FAIL" in out, out
    # the advice is one kvgate follows: a gate's result is final, so G1 again means a new campaign
    assert "run G1 in a new campaign" in out and "--baseline failedg1" in out, out
    code, out = kvgate(capsys, *gate_argv("G1", base.inv, base.prof, base.reports, "failedg1"))
    assert code == 2 and "already has recorded steps" in out, out
