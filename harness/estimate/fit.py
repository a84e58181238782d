"""Does the profile's model fit the inventory's accelerators? The estimator's HBM arithmetic
(``capacity_plan``: devices x memory x ``--gpu-memory-utilization`` - weights = the KV budget) turned
into what ``kvgate validate`` and ``kvgate plan`` refuse, and into the model ``kvgate init`` picks.

Refused (vLLM itself would not start): a KV budget at or below zero (the weights alone fill the
accelerators), or one request of ``model.max_model_len`` tokens not fitting it (vLLM's "To serve at
least one request with the model's max seq len ... larger than the available KV cache memory").
Said, not refused: a concurrency whose requests do not all fit at once (vLLM queues them, so that
point's TTFT includes queueing). Not checked: a node with no accelerator memory declared, a model
whose parameter count is unknown (a ``geometry:`` profile: its weights are not known).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness.config.inventory import Inventory, Node
from harness.config.profile import Profile
from harness.config.yamlsource import YamlDocument
from harness.errors import ConfigError, InputError
from harness.estimate.geometry import ModelGeometry, kv_sizes
from harness.estimate.hardware import Accelerator, find_accelerator
from harness.estimate.loader import geometry_for_profile
from harness.estimate.plan import EstimateInputs, capacity_plan
from harness.estimate.presets import PRESET_CONFIGS, preset_geometry

GIB = 1024**3


@dataclass(frozen=True)
class Fit:
    """The fit of one profile on one node's accelerators."""

    refusals: tuple[str, ...]  # vLLM would not start: validate and plan exit 2
    notes: tuple[str, ...]  # said, not refused
    checked: bool  # False: nothing to check it against (no memory declared, or no parameter count)

    @property
    def fits_every_concurrency(self) -> bool:
        return self.checked and not self.refusals and not self.notes


def _server(inventory: Inventory) -> Optional[Node]:
    servers = inventory.nodes_with_role("server")
    return servers[0] if servers else None


def _request_tokens(profile: Profile) -> int:
    return profile.load.input_len + (16 if profile.load.workload == "long-doc" else 0)  # as estimate_profile


def profile_fit(profile: Profile, inventory: Inventory, *, profile_path: Optional[Path] = None) -> Fit:
    """The fit of ``profile`` on the inventory's first server node (where kvgate runs its engines)."""
    node = _server(inventory)
    acc = node.accelerators if node is not None else None
    if node is None or acc is None or acc.memory is None or acc.count == 0:
        return Fit((), (), False)
    geom = geometry_for_profile(profile, profile_path=profile_path)
    return fit_on(profile, geom, Accelerator(acc.model, float(acc.memory), None, "the inventory's"), node.name)


def fit_on(profile: Profile, geom: ModelGeometry, acc: Accelerator, node: str) -> Fit:
    """The fit of ``profile`` with model ``geom`` on devices of ``acc`` (memory per device)."""
    if geom.total_params is None:
        return Fit((), (), False)
    chunk = next((a.lmcache.chunk_size for a in profile.arms if a.offload), 256)
    sizes = kv_sizes(geom, request_tokens=_request_tokens(profile), chunk_size=chunk,
                     tp=profile.model.tensor_parallel_size)
    hbm = capacity_plan(profile, EstimateInputs(geometry=geom, accelerator=acc, hbm_bytes=acc.memory_bytes),
                        sizes.per_request)["hbm"]
    budget = float(hbm["kv_budget"])
    where = (f"{hbm['devices']} x {float(acc.memory_bytes or 0) / GIB:.1f} GiB {acc.name} on {node} x "
             f"{hbm['utilization']:g} - weights {hbm['weights'] / GIB:.1f} GiB = KV budget {budget / GIB:.1f} GiB")
    if budget <= 0:
        return Fit((f"model {profile.model.served_name or profile.model.name} does not fit: {where}; vLLM "
                    "would not start. Choose a smaller model (model.preset or model.config_json), more devices "
                    "(model.tensor_parallel_size) or check accelerators.memory in the inventory",), (), True)
    refusals: list[str] = []
    longest = profile.model.max_model_len
    if longest is not None and geom.bytes_for_context(longest) > budget:
        refusals.append(f"one request of model.max_model_len {longest} tokens needs "
                        f"{geom.bytes_for_context(longest) / GIB:.1f} GiB of KV, more than the {where}: vLLM "
                        "would refuse to start. Lower model.max_model_len or choose a smaller model")
    short = [c for c, ok in hbm["fits"].items() if not ok]
    notes = [f"concurrency {', '.join(short)}: {', '.join(short)} requests of {sizes.per_request / GIB:.2f} GiB KV "
             f"exceed the {where}; vLLM queues the rest, so those points' TTFT includes queueing"] if short else []
    return Fit(tuple(refusals), tuple(notes), True)


def fitting_preset(profile: Profile, acc: Accelerator) -> Optional[str]:
    """The largest estimator preset (by parameters) that fits ``acc`` at every concurrency of the
    profile, or None when none does (``tiny`` is an emulator geometry, never chosen)."""
    names = sorted((n for n in PRESET_CONFIGS if n != "tiny"),
                   key=lambda n: -(preset_geometry(n).total_params or 0.0))
    for name in names:
        model = profile.model.model_copy(update={"preset": name, "geometry": None})
        trial = profile.model_copy(update={"model": model})
        if fit_on(trial, preset_geometry(name), acc, "the declared node").fits_every_concurrency:
            return name
    return None


def accelerator_of(model: str, memory: Optional[float]) -> Accelerator:
    """The accelerator named ``model`` with ``memory`` bytes per device (the inventory's figure wins)."""
    preset = find_accelerator(model)
    mem = memory if memory is not None else (preset.memory_bytes if preset else None)
    if mem is None:
        raise InputError(f"accelerator {model!r}: no memory per device known; give accelerators.memory")
    return Accelerator(model, mem, preset.peak_flops if preset else None, "the inventory's")


def fit_errors(profile: Profile, doc: Optional[YamlDocument], path: str,
               inventory: Optional[Inventory]) -> tuple[list[ConfigError], list[str]]:
    """``profile_fit`` as located errors (at ``model``) and notes, for ``kvgate validate`` and ``plan``."""
    if inventory is None:
        return [], []
    try:
        fit = profile_fit(profile, inventory, profile_path=Path(path))
    except InputError as exc:  # an unreadable config.json: named, located at the model
        fit = Fit((exc.message,), (), True)
    line, col = doc.locate(("model",)) if doc is not None else (None, None)
    errors = [ConfigError(msg, path=path, line=line, column=col, field="model") for msg in fit.refusals]
    return errors, [f"{path}: {note}" for note in fit.notes]
