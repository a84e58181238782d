"""The SLO capacity's confirmation repetitions (the runs; the rules are in ``pipelines/shared/slo.py``).

After an arm's sweep, when the profile sets ``load.slo``: measure ``slo.confirm_repetitions``
fresh repetitions at the sweep's SLO capacity, numbered after the sweep's repetitions (the same
cold-restore protocol, the same resumable state keys ``sweep/<arm>/c<N>/rep<R+i>``); if they do
not all meet the SLO, step down to the next lower swept concurrency and confirm there, until one
confirms or none is left. Repetitions already recorded are not run again (``--resume``), and G3
reads the baseline's from G2's state with :func:`load_confirmations`.
"""

from __future__ import annotations

from typing import Any

from harness.config.profile import Profile, SloSpec
from harness.errors import InfraError
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.slo import confirm_order, confirmed_capacity
from harness.pipelines.shared.sweep import load_points, run_arm_sweep
from harness.pipelines.shared.sweepdata import Sweep

__all__ = ["confirm_slo_capacity", "load_confirmations"]


def _points(profile: Profile, slo: SloSpec, conc: int) -> list[tuple[int, int]]:
    first = profile.load.repetitions + 1
    return [(conc, r) for r in range(first, first + slo.confirm_repetitions)]


def load_confirmations(gate_dir: Any, profile: Profile, arm: str) -> Sweep:
    """The confirmation repetitions of ``arm`` recorded in a gate's state (empty without load.slo)."""
    slo = profile.load.slo
    if slo is None:
        return {}
    return load_points(gate_dir, arm, [p for c in profile.load.concurrency for p in _points(profile, slo, c)])


def confirm_slo_capacity(run: GateRun, arm: str, sweep: Sweep) -> Sweep:
    """Run the bounded, confirmed search for ``arm`` (see the module docstring); returns the
    confirmation repetitions measured. A fault stops the search, is recorded, and keeps what was
    measured (the capacity is then unconfirmed, so the gain at the SLO is NOT_RUN)."""
    slo = run.profile.load.slo
    if slo is None:
        return {}
    confirmations: Sweep = {}
    for conc in confirm_order(sweep, slo):
        try:
            got = run_arm_sweep(run, arm, label=f"{arm} SLO confirmation at c{conc}",
                                points=_points(run.profile, slo, conc))
        except InfraError as exc:
            run.fault(f"the SLO confirmation of {arm} at c{conc} stopped", exc)
            got = load_points(run.gate_dir, arm, _points(run.profile, slo, conc))
            confirmations.update(got)
            break
        confirmations.update(got)
        if not got.get(conc) or confirmed_capacity(sweep, confirmations, slo) is not None:
            break  # none counted here (faults, recorded): the search cannot honestly go on
    return confirmations
