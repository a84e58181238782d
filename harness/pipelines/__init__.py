"""Gate pipelines: G1 (arrival), G2 (baseline), G3 (candidate vs baseline); the campaign flow."""
