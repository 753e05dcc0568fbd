"""Where the project's configuration lives (``conf/`` at the repository root)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"


def preset_names(group: str) -> list[str]:
    """Names of the YAML presets in ``conf/<group>/`` (sorted)."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
