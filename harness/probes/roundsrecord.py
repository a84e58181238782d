"""How one job set's bandwidth was measured under the gates' protocol (``harness.probes.fio_rounds``):
every round, the steady-state verdict on the last :data:`WINDOW`, the drain, preconditioning, the
working set against the declared cache and the target's backing. Kept apart from the runner so the
result types of ``fio_run`` can carry it without an import cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from harness.probes.drain import DrainRecord
from harness.probes.steady import STEADY_WINDOW, SteadyState

WINDOW = STEADY_WINDOW


@dataclass(frozen=True, kw_only=True)
class InRounds:
    """The round figures of a node I/O probe run in rounds (checkpoint write, model load), shared by
    their results; keyword-only so that each result's own fields come first."""

    rounds: tuple[float, ...] = ()  # bandwidth of every round, in order
    steady: Optional[SteadyState] = None  # on the last WINDOW rounds
    drain: Optional[DrainRecord] = None  # the node's writes before the first round

    @property
    def window(self) -> tuple[float, ...]:
        return self.rounds[-WINDOW:]


@dataclass(frozen=True)
class RoundsRecord:
    """How one job set's figure was measured (the protocol in the module docstring)."""

    round_s: float
    max_rounds: int
    series: dict[str, tuple[float, ...]]  # direction -> bytes/s of every round, in order
    steady: SteadyState  # judged on the last WINDOW rounds (read + write summed)
    drain: DrainRecord
    precondition: str
    working_set_bytes: int
    cache_note: str
    cache_problem: Optional[str]
    backing: str
    memory_tier: bool
    outputs: tuple[Path, ...] = field(default=())  # the run's fio JSON: its status dumps are the rounds
    jobfile: Optional[Path] = None
    buffers: str = ""  # where fio's I/O buffers lived (harness.probes.iobuffers)

    @property
    def io(self) -> str:
        """How fio moved the bytes: ``buffered`` for a declared RAM tier (harness.probes.fio_jobs.buffered)."""
        return "buffered" if self.memory_tier else "direct"

    @property
    def window_outputs(self) -> tuple[Path, ...]:
        """The fio outputs the figure and its interval come from: the rounds are status dumps of one
        run, so that is the run's output."""
        return self.outputs

    def window(self, direction: str) -> tuple[float, ...]:
        return self.series.get(direction, ())[-WINDOW:]

    @property
    def rounds(self) -> int:
        return max((len(v) for v in self.series.values()), default=0)

    def to_json(self) -> dict[str, object]:
        return {"round_s": self.round_s, "max_rounds": self.max_rounds, "rounds": self.rounds,
                "series": {k: list(v) for k, v in self.series.items()}, "steady_state": self.steady.to_json(),
                "drain": self.drain.to_json(), "precondition": self.precondition,
                "working_set_bytes": self.working_set_bytes, "cache_note": self.cache_note,
                "cache_problem": self.cache_problem, "backing": self.backing, "memory_tier": self.memory_tier,
                "io": self.io,
                # the node's page cache is out of the figure whether or not kvgate may drop it; a declared
                # RAM tier's bytes are memory whatever the I/O mode
                "page_cache": ("measured: a RAM tier declared kind: memory, read and written buffered (fio direct=0); "
                               "the figure is a memory figure, never a storage one") if self.memory_tier else
                              "bypassed: every read and write is O_DIRECT (fio direct=1)",
                "rounds_are": "consecutive rounds of one continuous fio run, each closed by fio's cumulative "
                              "status dump (--status-interval); the run is stopped once the last rounds are steady, so "
                              "its JSON may hold one dump more than the rounds judged, written as fio stopped",
                "io_buffers": self.buffers,
                "outputs": [p.name for p in self.outputs]}
