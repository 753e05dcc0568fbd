"""Shared figure style: one colour per policy across every figure, Agg backend, saving."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"moespac": "tab:red", "llamacpp_sd": "tab:blue", "llamacpp": "tab:cyan", "hybrimoe": "tab:green",
          "sp_moe": "tab:purple", "moe_infinity": "tab:brown", "accelerate": "tab:pink", "vllm": "tab:olive",
          "mixtral_offload": "goldenrod", "fate": "tab:orange", "fiddler": "teal", "ktransformers": "slateblue",
          "ondemand_lru": "rosybrown", "heuristic_oracle": "black", "heuristic_oracle_ar": "dimgray",
          "adaspec": "darkred",
          "moespac_static": "salmon", "moespac_no_estimator": "darkorange", "moespac_no_balancer": "orchid",
          "moespac_sync": "sienna", "moespac_ar": "lightcoral"}


def color(policy: str):
    """The policy's colour (grey for unknown policies)."""
    return COLORS.get(policy, "tab:gray")


def figure(width: float = 7.5, height: float = 4.5):
    """A new figure and axes with a light grid."""
    fig, ax = plt.subplots(figsize=(width, height))
    ax.grid(True, alpha=0.3)
    ax.set_axisbelow(True)
    return fig, ax


def save(fig, path: str | Path) -> Path:
    """Write ``fig`` as a PNG (creating folders) and close it."""
    from traces.atomic import save_png

    return save_png(fig, path, dpi=130)
