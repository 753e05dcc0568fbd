"""The simulator: hardware and model specs, cost model, expert cache, SimPy engine, policies, CLI."""
