"""A per-step draft length in the real engine: lossless tokens, every chosen gamma is run."""
from __future__ import annotations

import pytest

from tests.real import need

need("torch")
need("transformers")

from real.offload.run import run  # noqa: E402
from real.speculative import SpeculativeDecoder  # noqa: E402
from tests.real.test_offload_tokens import options, reference  # noqa: E402,F401


class Varying(SpeculativeDecoder):
    """Drafts 0, 1, 3, 0, 2, ... tokens: a schedule no fixed gamma produces."""

    PLAN = (0, 1, 3, 0, 2)

    def next_gamma(self, index):
        return self.PLAN[index % len(self.PLAN)]


def test_varying_gamma_is_lossless_on_the_plain_decoder(reference):   # noqa: F811
    from real.offload.models import load_models
    from real.offload.run import prompt_list
    opts = options("tiny:qwen3_moe", "moespac")
    models = load_models(opts)
    (_, ids), = prompt_list(opts, models)
    tokens, steps = Varying(models.target, models.draft, gamma=3).generate(ids, 14)
    assert tokens == reference["tiny:qwen3_moe"]
    assert [s.n_verified - 1 for s in steps[:5]] == [0, 1, 3, 0, 2][:len(steps[:5])]


@pytest.mark.parametrize("target", ["tiny:qwen3_moe", "tiny:deepseek_v2"])
def test_adaspec_in_the_real_engine_is_lossless(reference, target):   # noqa: F811
    report = run(options(target, "adaspec", "policy_args.warmup=2", "policy_args.probe=1",
                         "policy_args.explore_every=3"))
    assert report.tokens[0] == reference[target]
    row = report.rows[0]
    assert row["gamma"] == 12 and 0 < row["ar_step_share"] < 1     # it both speculated and did not
