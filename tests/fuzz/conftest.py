"""Fuzz targets (Hypothesis). In the normal suite each target runs a small number of examples;
``make fuzz`` runs them with the ``fuzz`` profile: KVGATE_FUZZ_EXAMPLES examples per target
(default 20000), each target bounded by pytest-timeout, statistics printed."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("fuzz", max_examples=int(os.environ.get("KVGATE_FUZZ_EXAMPLES", "20000")),
                          deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("KVGATE_HYPOTHESIS_PROFILE", "ci"))
