"""Gate pipelines, by what they run (docs/ARCHITECTURE.md, "Pipelines"):

* ``gaterun``: one gate end to end (inputs, campaign, the gate's pipeline, verdict, reports) and the demo;
* ``g1``, ``g2``, ``g3``, ``g4``: one package per gate, its own steps only;
* ``nightly``: the nightly regression run and the run history it reads and writes;
* ``cliff``: the capacity-cliff sweep (``kvgate cliff``);
* ``shared``: the steps more than one of them runs (the gate run context, engine instances, the
  arm sweep, load points, cold restore, drain, probes steps, tier hits, SLO capacity).

Arrows (import-linter contracts in pyproject.toml): gaterun -> g1..g4 -> shared; nightly and cliff ->
shared; the gate packages, nightly and cliff do not import each other; shared imports none of them."""
