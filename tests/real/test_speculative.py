"""The speculative decoding loop and router recording on tiny random MoE targets (CPU)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.real import need

torch = need("torch")
need("transformers")

from real.router_hooks import RouterRecorder, RoutingCollector, capture_trace  # noqa: E402
from real.speculative import DecodeObserver, SpeculativeDecoder, mean_accepted  # noqa: E402
from real.tiny_models import VOCAB, build_tiny  # noqa: E402

N_NEW = 32
TARGETS = ("qwen3_moe", "deepseek_v2")


@pytest.fixture(scope="module")
def models():
    """Tiny targets and the dense draft (seed 0), plus two random prompts."""
    gen = torch.Generator().manual_seed(7)
    prompts = [torch.randint(0, VOCAB, (1, 12), generator=gen) for _ in range(2)]
    return {k: build_tiny(k) for k in TARGETS + ("dense",)}, prompts


@pytest.fixture(scope="module")
def greedy(models):
    """Reference: the target's own ``generate`` (plain greedy), per target and prompt."""
    nets, prompts = models
    with torch.inference_mode():
        return {(k, i): nets[k].generate(p, do_sample=False, max_new_tokens=N_NEW,
                                         min_new_tokens=N_NEW)[0, p.shape[1]:].tolist()
                for k in TARGETS for i, p in enumerate(prompts)}


@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("gamma", [0, 1, 4, 8])
def test_lossless_against_plain_greedy(models, greedy, kind, gamma):
    nets, prompts = models
    for i, prompt in enumerate(prompts):
        tokens, steps = SpeculativeDecoder(nets[kind], nets["dense"], gamma).generate(prompt, N_NEW)
        assert tokens == greedy[(kind, i)]
        assert all(s.n_verified == gamma + 1 for s in steps)
        assert 1 + sum(s.accepted + 1 for s in steps) == len(tokens) == N_NEW


@pytest.mark.parametrize("gamma", [4, 8])
def test_drafts_are_both_accepted_and_rejected(models, gamma):
    """The tiny pair exercises acceptance AND rollback: 0 < mean accepted < gamma."""
    nets, prompts = models
    _, steps = SpeculativeDecoder(nets["qwen3_moe"], nets["dense"], gamma).generate(prompts[0], 40)
    assert 0 < mean_accepted(steps[:-1]) < gamma
    assert any(s.accepted < gamma for s in steps[:-1])


@pytest.mark.parametrize("n_new", [1, 2, 5, 13])
def test_stops_exactly_at_max_new_tokens(models, greedy, n_new):
    nets, prompts = models
    tokens, steps = SpeculativeDecoder(nets["qwen3_moe"], nets["dense"], 8).generate(prompts[0], n_new)
    assert tokens == greedy[("qwen3_moe", 0)][:n_new]
    assert 1 + sum(s.accepted + 1 for s in steps) == n_new


def test_stops_after_eos(models, greedy):
    nets, prompts = models
    ref = greedy[("deepseek_v2", 1)]
    eos = ref[9]
    tokens, _ = SpeculativeDecoder(nets["deepseek_v2"], nets["dense"], 4, eos_token_id=eos).generate(
        prompts[1], N_NEW)
    assert tokens == ref[:ref.index(eos) + 1]


def test_observer_sees_phases_in_order(models):
    nets, prompts = models
    events = []

    class Log(DecodeObserver):
        def on_prefill(self, n, tok): events.append(("prefill", n))
        def on_step_start(self, i): events.append(("start", i))
        def on_verify_start(self, i, window): events.append(("verify", i, len(window)))
        def on_step(self, step): events.append(("step", step.index))
        def on_final(self, tok): events.append(("final",))

    dec = SpeculativeDecoder(nets["qwen3_moe"], nets["dense"], 4, observer=Log(), final_forward=True)
    _, steps = dec.generate(prompts[0], 10)
    want = [("prefill", 12)]
    for s in steps:
        want += [("start", s.index), ("verify", s.index, 5), ("step", s.index)]
    assert events == want + [("final",)]


def test_bad_arguments(models):
    nets, prompts = models
    with pytest.raises(ValueError, match="draft"):
        SpeculativeDecoder(nets["qwen3_moe"], None, 4)
    with pytest.raises(ValueError, match="max_new_tokens"):
        SpeculativeDecoder(nets["qwen3_moe"], nets["dense"], 4).generate(prompts[0], 0)
    with pytest.raises(ValueError, match="batch"):
        SpeculativeDecoder(nets["qwen3_moe"], nets["dense"], 4).generate(torch.zeros(2, 3, dtype=torch.long), 4)


def _capture(nets, kind, gamma, prompt, n_new=N_NEW):
    with RouterRecorder(nets[kind]) as rec:
        dec = SpeculativeDecoder(nets[kind], nets["dense"] if gamma else None, gamma)
        trace, tokens = capture_trace(rec, dec, prompt, n_new, {"schema_version": 1, "source": "captured",
                                                                "model": kind, "n_layers": rec.n_layers,
                                                                "n_experts": 16, "top_k": 4})
    return trace.validate(), tokens


def _as_sets(arr):
    return np.sort(arr, axis=-1)


@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("gamma", [1, 4, 8])
def test_recorded_routing_equals_ar_routing(models, kind, gamma):
    """Accepted positions of SD verify windows route exactly like the same tokens decoded plainly."""
    nets, prompts = models
    ar, ar_tokens = _capture(nets, kind, 0, prompts[0])
    sd, sd_tokens = _capture(nets, kind, gamma, prompts[0])
    assert sd_tokens == ar_tokens and sd.n_tokens == len(sd_tokens) == N_NEW
    np.testing.assert_array_equal(_as_sets(sd.experts), _as_sets(ar.experts))
    np.testing.assert_array_equal(_as_sets(sd.prefill), _as_sets(ar.prefill))
    np.testing.assert_array_equal(_as_sets(sd.next_pred), _as_sets(ar.next_pred))
    order_sd, order_ar = np.argsort(sd.experts, -1), np.argsort(ar.experts, -1)
    np.testing.assert_allclose(np.take_along_axis(sd.weights, order_sd, -1),
                               np.take_along_axis(ar.weights, order_ar, -1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", TARGETS)
def test_sd_record_layout(models, kind):
    """Windows hold gamma+1 rows; rows 0..accepted of each step, then the final row, are the tokens."""
    nets, prompts = models
    trace, tokens = _capture(nets, kind, 4, prompts[1])
    sd = trace.sd
    assert sd.experts.shape[1:] == (5, trace.n_layers, 4) and (sd.n_verified == 5).all()
    assert 1 + int((sd.accepted + 1).sum()) == len(tokens) == trace.n_tokens
    rows = [sd.experts[s, :a + 1] for s, a in enumerate(sd.accepted)]
    np.testing.assert_array_equal(np.concatenate(rows), trace.experts[:-1])


def test_dense_layers_skipped_and_next_layer_prediction(models):
    nets, prompts = models
    with RouterRecorder(nets["deepseek_v2"]) as rec:
        assert [i for i, _ in rec.moe_layers] == [1, 2, 3]
    trace, _ = _capture(nets, "deepseek_v2", 4, prompts[0])
    assert trace.experts.shape[1] == 3 and (trace.next_pred[:, -1] == -1).all()
    overlap = [len(set(trace.next_pred[t, l]) & set(trace.experts[t, l + 1]))
               for t in range(trace.n_tokens) for l in range(2)]
    assert np.mean(overlap) > 2.0  # chance is k*k/E = 1.0


def test_collector_requires_pop_per_forward(models):
    nets, prompts = models
    with RouterRecorder(nets["qwen3_moe"]) as rec, torch.inference_mode():
        with pytest.raises(RuntimeError, match="no routing"):
            rec.pop()
        nets["qwen3_moe"](prompts[0])
        assert rec.pop().ids.shape == (12, 4, 4)
    assert isinstance(RoutingCollector(rec), DecodeObserver)
