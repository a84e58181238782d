"""The KV emulator: an OpenAI-compatible server that emulates compute and performs real storage I/O.

Stdlib only (it runs on nodes through the agent zipapp). Entry point: ``harness.sim.cli.main``.
"""
