"""Benchmarks that print figures, not pass/fail: each measures kubelite beside the raw ceiling
of the same machine in the same run, and reports the ratio (``python -m bench.store``)."""
