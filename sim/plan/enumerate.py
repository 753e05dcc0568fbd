"""The placements each engine can express, priced by :mod:`sim.plan.evaluate`.

- llama.cpp: ``--n-cpu-moe N`` for every N (the experts of the first N MoE layers on the CPU); one
  ``-ot`` layer set at the largest whole-layer count that fits, the layers that gain most from the
  GPU (listed only when it differs from ``--n-cpu-moe``'s last layers); ``-ngl N`` for every N up to
  the layer count (whole layers on the CPU: attention, KV and experts in host DRAM, the output layer
  on the CPU too); with a draft, all of them with speculative decoding. A layer's experts are one
  tensor per projection (``ffn_*_exps``), so ``-ot`` cannot split a layer's experts between devices:
  per-expert splits are kTransformers' (or a dynamic policy's).
- kTransformers: ``--kt-num-gpu-experts K`` per layer, placed by activation frequency (the global
  top ``K x layers`` of the profile), for K up to what fits.
- dynamic policies (MoE-SpAc and the caching baselines): one SimPy run each at the largest slot
  count that fits.

Pruning: every whole-layer placement is a sum of two per-layer vectors, so the whole ``--n-cpu-moe``
curve (fitting or not, for the figure), the ``-ngl`` curve and the best ``-ot`` set cost two
evaluations; kTransformers'
K is sampled on at most ``MAX_KT_POINTS`` values; nothing that does not fit is simulated by the engine.
Sources: llama.cpp ``common/arg.cpp`` (``--n-cpu-moe``, ``-ot``), SGLang kt-kernel server args
(``--kt-num-gpu-experts``, per layer); docs/sources.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from sim.machine.memory_plan import MemoryPlan
from sim.plan.evaluate import Setting, StaticTable, fits
from sim.policies import make_policy
from sim.run.runner import run_one
from sim.run.spec import RunSpec

MAX_KT_POINTS = 33
ENGINES = ("llama_cpp", "ktransformers", "dynamic")


@dataclass
class Candidate:
    """One placement: which engine and knob, its predicted tok/s and its VRAM plan."""

    engine: str            # llama_cpp | llama_cpp_sd | ktransformers | dynamic
    policy: str            # the simulated policy preset
    knob: str              # n_cpu_moe | ngl | ot | kt_num_gpu_experts | slots
    value: int             # N, -ngl N, whole layers on the GPU, K per layer, or slots
    tps: float
    plan: MemoryPlan
    gpu_layers: tuple = ()   # -ot: the MoE layers whose experts are on the GPU
    runtime: str = ""
    gamma: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return fits(self.plan)


def llama_cpp(setting: Setting, speculative: bool = False) -> list[Candidate]:
    """``--n-cpu-moe N`` and ``-ngl N`` for N = 0..L (all, for the curves; ``fits`` says which fit)
    and the best ``-ot`` set."""
    policy = "llamacpp_sd" if speculative else "llamacpp"
    engine = "llama_cpp_sd" if speculative else "llama_cpp"
    m = setting.spec
    L, E = m.n_layers, m.n_experts
    table = StaticTable(setting, policy)
    on_gpu, on_cpu = table.whole_layer_s()
    rt, g = table.cost.hw.runtime, table.gamma
    full = StaticTable(setting, policy, all_gpu=True)   # N = 0: no CPU split, the runtime's graph kernels
    out = []
    for n in range(L + 1):
        secs = table.fixed_s + on_cpu[:n].sum() + on_gpu[n:].sum() if n else full.decode_s(np.ones((L, E), bool))
        out.append(Candidate(engine, policy, "n_cpu_moe", n, table.tps(secs), setting.memory(policy, (L - n) * E),
                             runtime=rt, gamma=g))
    for n in range(L + 1):
        out.append(Candidate(engine, policy, "ngl", n, table.tps(table.ngl_s(n)),
                             setting.memory(policy, n * E, cpu_layers=L - n), runtime=rt, gamma=g))
    k = max((L - c.value for c in out if c.knob == "n_cpu_moe" and c.fits), default=0)
    layers = best_layers(on_gpu, on_cpu, k)
    if k and layers != tuple(range(L - k, L)):
        chosen = np.zeros(L, bool)
        chosen[list(layers)] = True
        secs = table.fixed_s + on_gpu[chosen].sum() + on_cpu[~chosen].sum()
        out.append(Candidate(engine, policy, "ot", k, table.tps(secs), setting.memory(policy, k * E),
                             gpu_layers=layers, runtime=rt, gamma=g))
    return out


def best_layers(on_gpu: np.ndarray, on_cpu: np.ndarray, k: int) -> tuple:
    """The ``k`` layers that save most by holding their experts on the GPU (ties: the later layer)."""
    saving = on_cpu - on_gpu
    order = sorted(range(len(saving)), key=lambda l: (-saving[l], -l))
    return tuple(sorted(order[:k]))


def ktransformers(setting: Setting) -> list[Candidate]:
    """``--kt-num-gpu-experts K`` (frequency placement) for K = 0 .. the largest that fits."""
    m = setting.spec
    L, E = m.n_layers, m.n_experts
    empty = setting.memory("ktransformers", 0)
    if not fits(empty):
        return []
    k_max = min(E, empty.max_slots // L)
    table = StaticTable(setting, "ktransformers")
    ks = sorted({int(round(x)) for x in np.linspace(0, k_max, min(k_max + 1, MAX_KT_POINTS))} | {k_max})
    out = []
    for k in ks:
        secs = table.decode_s(table.policy_mask(k * L))
        out.append(Candidate("ktransformers", "ktransformers", "kt_num_gpu_experts", k, table.tps(secs),
                             setting.memory("ktransformers", k * L), runtime=table.cost.hw.runtime))
    return out


def dynamic(setting: Setting, policies: list[str]) -> list[Candidate]:
    """Each dynamic policy once, at the largest number of expert slots that fits (SimPy engine)."""
    m = setting.spec
    total = m.n_layers * m.n_experts
    out = []
    for name in tqdm(policies, desc="dynamic policies", leave=False):
        plan = setting.memory(name, 0)
        slots = min(plan.max_slots, total)
        if not fits(plan) or slots == 0:
            continue
        pol = make_policy(name)
        row = run_one(RunSpec.of(policy=name, workload=setting.workload, cache_ratio=slots / total, hardware=setting.hardware,
                      model=setting.model, draft=setting.draft if pol.speculative else "none", gamma=setting.gamma,
                      gen_tokens=setting.gen_tokens, seed=setting.seed, trace=setting.trace,
                      acceptance=setting.acceptance, prompt_tokens=setting.prompt_tokens, context=setting.context,
                      runtime=setting.runtime, quant=setting.quant, quant_dense=setting.quant_dense,
                      vram_budget_gib=setting.vram_budget_gib, **memory_keys(setting.engine)))
        res = row.row
        out.append(Candidate("dynamic", name, "slots", res["n_slots"], res["tps"], row.plan, runtime=res["runtime"],
                             gamma=res["gamma"], extra={"hit_rate": res["hit_rate"], "cache_ratio": res["cache_ratio"]}))
    return out


def enumerate_all(setting: Setting, engines: list[str], dynamic_policies: list[str],
                  dynamic_sd: list[str]) -> list[Candidate]:
    """Every candidate of the chosen engines (speculative ones only with a draft)."""
    with_draft = setting.draft not in (None, "none")
    out: list[Candidate] = []
    if "llama_cpp" in engines:
        out += llama_cpp(setting)
        if with_draft:
            out += llama_cpp(setting, speculative=True)
    if "ktransformers" in engines:
        out += ktransformers(setting)
    if "dynamic" in engines:
        out += dynamic(setting, list(dynamic_policies) + (list(dynamic_sd) if with_draft else []))
    return out


def memory_keys(engine) -> dict:
    """The run keys of the plan's engine memory options (KV cache types, flash attention, -ub), so a
    simulated policy is planned with the memory the engine placements are charged; none by default."""
    if engine is None:
        return {}
    return {"cache_type_k": engine.cache_type_k, "cache_type_v": engine.cache_type_v,
            "flash_attn": engine.flash_attn, "swa_full": engine.swa_full, "ubatch": engine.ubatch,
            "op_offload": engine.op_offload}
