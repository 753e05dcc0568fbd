"""A run from its specification: the spec, resolution of its inputs, the runner, sweeps, result files,
row identity and parallel execution."""
