"""Gate evaluation: metric paths, comparators, bootstrap intervals, verdicts."""
