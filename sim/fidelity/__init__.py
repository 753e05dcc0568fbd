"""Fidelity: simulated decode speed held against published measurements on real hardware
(``python -m sim validate``) and runtime profiles fitted to them (``python -m sim calibrate``)."""
