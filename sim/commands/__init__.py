"""One module per ``python -m sim`` subcommand (Hydra task functions and plain key=value commands)."""
