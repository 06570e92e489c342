"""The fact write path lives in memory.fact_writes. This name stays only for the one import from
corrections that has not moved to it yet."""

from memory.fact_writes import supersede_standing  # noqa: F401 (re-exported: corrections.sweep_pages)
