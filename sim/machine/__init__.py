"""Specs built from sources: quantization formats, machines (GPU x host x link x runtime), models
derived from Hugging Face ``config.json`` files."""
