"""Platforms are registered objects: every registered platform has its parser, captured output and
docs; and a new platform works (inventory, engine plan, facts, comparison) by registering one object,
with no other file changed (docs/ARCHITECTURE.md, "Where to add things")."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.engines.planning import plan_common
from harness.errors import InputError
from harness.facts.collect import collect_facts
from harness.facts.compare import compare_facts
from harness.facts.model import Accelerator
from harness.facts.parsers.common import FactsParseError
from harness.platforms import PLATFORMS, FactsCollector, Platform, get_platform, register_platform
from harness.platforms.registry import unregister_platform
from harness.remote.local import LocalExecutor

REPO = Path(__file__).resolve().parents[2]
FACTS_DATA = REPO / "tests" / "data" / "facts"


@pytest.mark.parametrize("name", list(PLATFORMS))
def test_every_platform_has_parser_captured_output_and_docs(name: str) -> None:
    p = get_platform(name)
    assert p.name == name and p.description
    docs = (REPO / "docs" / "ARCHITECTURE.md").read_text() + (REPO / "docs" / "reference" / "inventory.md").read_text()
    assert f"`{name}`" in docs, f"platform {name} is not in docs/ARCHITECTURE.md and docs/reference/inventory.md"
    if not p.accelerator_tools:
        assert p.collect_accelerators is None and not p.device_vars
        return
    assert p.collect_accelerators is not None, f"{name} names tools but has no accelerator hook"
    hook_src = inspect.getsource(inspect.getmodule(p.collect_accelerators))  # type: ignore[arg-type]
    assert "harness.facts.parsers" in hook_src, f"{name}: its hook parses with no facts parser"
    sources = (FACTS_DATA / "SOURCES.md").read_text()
    for tool in p.accelerator_tools:
        captured = list(FACTS_DATA.glob(tool.replace("-", "") + "_*"))
        assert captured, f"{name}: no captured output of {tool} in tests/data/facts/"
        assert any(c.name in sources for c in captured), f"{tool}: captured output not listed in SOURCES.md"
    assert p.device_vars, f"{name} has accelerators but no device-visibility variable"
    assert p.software_key and p.collect_software_version is not None


def test_unknown_platform_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="known: mi308x, ascend910b, cuda, cpu"):
        get_platform("tpu")


# --- a fake platform, defined here only -----------------------------------------------------------

def parse_fakesmi(text: str) -> list[Accelerator]:
    devs = []
    for line in text.splitlines():
        if not line.startswith("card"):
            continue
        idx, model = line[4:].split(":", 1)
        devs.append(Accelerator(index=int(idx), card=int(idx), model=model.strip()))
    if not devs:
        raise FactsParseError("fakesmi: no card lines")
    return devs


def _collect(c: FactsCollector) -> None:
    devs = c.run_parse(("fakesmi",), parse_fakesmi)
    if devs is not None:
        c.facts.accelerators, c.facts.accelerator_source = devs, "fakesmi"


FAKE = Platform(name="fakex", description="a test platform", device_vars=("FAKE_VISIBLE_DEVICES",),
                accelerator_tools=("fakesmi",), collect_accelerators=_collect,
                engine_env={"FAKE_MODE": "1"})


@pytest.fixture()
def fake_platform() -> Iterator[Platform]:
    register_platform(FAKE)
    try:
        yield FAKE
    finally:
        unregister_platform(FAKE.name)


def _inventory(tmp_path: Path) -> Inventory:
    return Inventory.model_validate({
        "cluster": "t",
        "nodes": [{"name": "n1", "host": "localhost", "connection": "local", "platform": "fakex",
                   "accelerators": {"model": "FakeChip", "count": 2},
                   "storage": [{"name": "fast-disk", "path": str(tmp_path)}]}],
    })


def test_a_fake_platform_works_by_registering_one_object(
    fake_platform: Platform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inv = _inventory(tmp_path)  # the inventory accepts it
    node = inv.nodes[0]
    profile = Profile.model_validate(__import__("yaml").safe_load((REPO / "profiles" / "demo.yaml").read_text()))
    profile = profile.model_copy(update={"model": profile.model.model_copy(update={"tensor_parallel_size": 2})})
    common = plan_common(node, profile, profile.candidate, 0, None, "/tmp/w")
    assert common.devices == (0, 1)
    assert common.env["FAKE_VISIBLE_DEVICES"] == "0,1" and common.env["FAKE_MODE"] == "1"

    # facts through the platform's hook: a real local command (a script printing the tool's format)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "fakesmi"
    tool.write_text("#!/bin/sh\nprintf 'card0: FakeChip\\ncard1: FakeChip\\n'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    ex = LocalExecutor("n1")
    facts = collect_facts(ex, node)
    assert facts.accelerator_source == "fakesmi" and len(facts.accelerators or []) == 2
    leaf = compare_facts(node, facts)["accelerators"]["match"]
    assert leaf["value"] is True, leaf

    # without the tool: the comparison names the platform's tool, and the leaf is not collected
    tool.unlink()
    facts = collect_facts(ex, node)
    leaf = compare_facts(node, facts)["accelerators"]["match"]
    assert leaf["value"] is None and "fakesmi" in leaf["detail"]


def test_an_unregistered_platform_is_a_validation_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="unknown platform 'fakex'"):
        _inventory(tmp_path)
