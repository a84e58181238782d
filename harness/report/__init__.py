"""Reports of a gate and of a campaign, rendered from ``result.json`` alone (HTML with inline SVG
charts, Markdown, JUnit XML), plus the evidence manifest and OpenSSH (SSHSIG) signatures.

The ``GateResult.measurements`` layout the charts read is documented in ``harness.report.charts``.
"""

from harness.report.loader import ResultFileError, load_gate_result
from harness.report.render import gate_dirs, render_campaign_report, render_gate_reports
from harness.report.sign import SignError, VerifyReport, sign, verify, write_manifest

__all__ = [
    "ResultFileError",
    "SignError",
    "VerifyReport",
    "gate_dirs",
    "load_gate_result",
    "render_campaign_report",
    "render_gate_reports",
    "sign",
    "verify",
    "write_manifest",
]
