"""When speculation pays: acceptance per draft, equal-VRAM slots, gamma search, break-even maps."""
