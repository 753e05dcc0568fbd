"""Offloaded decoding is lossless: every registered policy, two MoE families, plain greedy reference.

The executor computes each expert where the policy placed it (device slot, CPU tier, demand fetch,
stream), with transfers on the copy engine's thread and asynchronous prefetching; in float32 on
the CPU the tokens must equal the reference model's own ``generate`` (plain greedy), whatever
the policy decides. The oracle gets its future from a pre-pass of the same prompt.
"""
from __future__ import annotations

import pytest

from tests.real import need

torch = need("torch")
need("transformers")

from real.offload.models import load_models  # noqa: E402
from real.offload.options import RunOptions, parse  # noqa: E402
from real.offload.run import prepare, prompt_list, run  # noqa: E402
from sim.policies import policy_names  # noqa: E402

TARGETS = ("tiny:qwen3_moe", "tiny:deepseek_v2")
N_NEW = 14
BASE = ["draft=tiny:dense", "cache_ratio=0.3", "gamma=4", f"max_new_tokens={N_NEW}", "prompts=tiny:1",
        "prompt_len=10", "quiet=true", "warmup=0"]


def options(target: str, policy: str, *extra: str) -> RunOptions:
    return parse(RunOptions, [f"target={target}", f"policy={policy}", *BASE, *extra])


@pytest.fixture(scope="module")
def reference():
    """HF ``generate`` (greedy) of the untouched tiny targets on the run's prompt."""
    out = {}
    for target in TARGETS:
        models = load_models(options(target, "moespac"))
        (_, ids), = prompt_list(options(target, "moespac"), models)
        with torch.inference_mode():
            x = torch.tensor([ids])
            gen = models.target.generate(x, do_sample=False, max_new_tokens=N_NEW, min_new_tokens=N_NEW)
        out[target] = gen[0, len(ids):].tolist()
    return out


@pytest.fixture(scope="module")
def prepared():
    """Each tiny target loaded and offloaded once for the whole module (policies change per run)."""
    ready = {}

    def get(target):
        if target not in ready:
            ready[target] = prepare(options(target, "moespac"))
        return ready[target]
    yield get
    for p in ready.values():
        p.close()


# every registered policy on the Qwen3-MoE family; on DeepSeek-V2 (shared experts, a dense layer)
# one policy per executor path: block copies, CPU/GPU split, prefetch + eviction, the future
# (pre-pass), streams, recorded signals, demand fetches
DEEPSEEK = ("accelerate", "fiddler", "moespac", "heuristic_oracle", "vllm", "hybrimoe", "ondemand_lru")
MATRIX = [("tiny:qwen3_moe", p) for p in policy_names()] + [("tiny:deepseek_v2", p) for p in DEEPSEEK]


@pytest.mark.parametrize("target, policy", MATRIX)
def test_tokens_equal_plain_greedy(reference, prepared, target, policy):
    report = run(options(target, policy), prepared(target))
    assert report.tokens[0] == reference[target]
    c = report.counters[0]
    assert c.tokens == N_NEW - 1 and c.requests > 0
    assert c.gpu_execs + c.cpu_execs == c.requests        # every requested expert ran exactly once


@pytest.mark.parametrize("policy", ["moespac", "ondemand_lru", "vllm", "heuristic_oracle"])
def test_sync_mode_is_lossless_too(reference, prepared, policy):
    report = run(options("tiny:qwen3_moe", policy, "sync=true"), prepared("tiny:qwen3_moe"))
    assert report.tokens[0] == reference["tiny:qwen3_moe"]


def test_check_option_compares_with_plain_greedy():
    report = run(options("tiny:deepseek_v2", "llamacpp_sd", "check=true", "prompts=tiny:2"))
    assert report.mismatches == [] and len(report.tokens) == 2
