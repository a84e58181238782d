"""Reports of a gate and of a campaign, rendered from ``result.json`` alone (HTML with inline SVG
charts, Markdown, JUnit XML), plus the evidence manifest and Ed25519 signatures."""

from harness.report.loader import ResultFileError, load_gate_result
from harness.report.render import gate_dirs, render_campaign_report, render_gate_reports

__all__ = [
    "ResultFileError",
    "gate_dirs",
    "load_gate_result",
    "render_campaign_report",
    "render_gate_reports",
]
