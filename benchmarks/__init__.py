"""benchmarks package."""
