"""``--format=csv`` as the issue-style flag becomes the Hydra override ``format=csv``."""
from __future__ import annotations

from sim.__main__ import _format_flag


def test_format_flag_forms():
    assert _format_flag(["cache_ratio=0.1", "--format=csv"]) == ["cache_ratio=0.1", "format=csv"]
    assert _format_flag(["--format", "json", "-m"]) == ["format=json", "-m"]
    assert _format_flag(["format=markdown"]) == ["format=markdown"]
