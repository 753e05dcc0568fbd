"""Synthetic routing for a shape without measured traces: assumed profile, marked in the metadata."""
import numpy as np
import pytest

from traces.errors import TraceError
from traces.synth import synthesize


def test_any_shape_gets_a_marked_assumed_profile():
    t = synthesize("gpt_oss_20b", "gsm8k", 64, seed=1, shape=(24, 32, 4, (), 0))
    assert t.experts.shape == (64, 24, 4) and t.experts.max() < 32
    assert all(len(set(row)) == 4 for row in t.experts.reshape(-1, 4))       # top-k distinct experts
    a = t.meta["routing_assumed"]
    assert a["basis"] == "mixtral_8x7b" and "no measured routing" in a["note"]   # 4/32 = 0.125: coarse experts
    fine = synthesize("dsv3", "gsm8k", 16, shape=(58, 256, 8, (0, 1, 2), 1)).meta["routing_assumed"]
    assert fine["basis"] == "qwen3_30b_a3b" and fine["shared_expert_reuse_factor"] == 0.85


def test_calibrated_models_stay_unmarked_and_unchanged():
    a = synthesize("qwen3_30b_a3b", "gsm8k", 32, seed=3)
    b = synthesize("qwen3_30b_a3b", "gsm8k", 32, seed=3, shape=(48, 128, 8, (), 0))
    assert "routing_assumed" not in b.meta and np.array_equal(a.experts, b.experts)


def test_assumed_reuse_follows_the_basis_profile():
    t = synthesize("m", "alpaca", 2048, shape=(16, 64, 4, (), 0))
    e = t.experts
    reuse = np.mean([[len(set(e[i, l]) & set(e[i + 1, l])) / 4 for l in range(16)] for i in range(len(e) - 1)])
    assert reuse > 3 * 4 / 64                    # far above chance, as in every measured MoE


def test_bad_shapes_are_named():
    with pytest.raises(TraceError, match="top_k"):
        synthesize("m", "gsm8k", 8, shape=(4, 8, 8))
    with pytest.raises(TraceError, match="unknown model class 'm'"):
        synthesize("m", "gsm8k", 8)
