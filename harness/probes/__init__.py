"""Storage probes: fio (job building, running, JSON parsing, aggregation), checkpoint write, model load."""
