"""``python -m sim plan``: the fastest expert placement that fits a VRAM budget, with the engine flags."""
