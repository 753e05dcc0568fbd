"""The second bad-input pass (cases K1-K24, docs/reliability.md): inputs that gave a wrong answer
without a word (BAD) or a traceback (POOR). Same form as :mod:`qa_cases`; its set-up
(:data:`SETUP_INPUTS`) writes the config.json and points files under ``$QA/k``.
"""
from __future__ import annotations

SETUP_INPUTS = r'''
mkdir -p $QA/k
python - <<PY
import json, os
from sim.machine.published import PRESETS
base = dict(PRESETS["qwen3_30b_a3b"][4])
for name, patch in {"heads0": {"num_attention_heads": 0}, "hid": {"hidden_size": 2048.5},
                    "vocab": {"vocab_size": -5}, "e7": {"num_experts": 10 ** 7}}.items():
    os.makedirs(f"$QA/k/{name}", exist_ok=True)
    json.dump({**base, **patch}, open(f"$QA/k/{name}/config.json", "w"))
os.makedirs("$QA/k/badjson", exist_ok=True)
open("$QA/k/badjson/config.json", "w").write('{"model_type": "qwen3_moe",')
PY
RUN='{policy: llamacpp, model: qwen3_30b_a3b, gpu: rtx4090, host: desktop_ddr5_2ch, link: pcie4_x16}'
P() { printf 'points:\n  - {id: X1, measured_tok_s: %s, source: s, grade: A, run: %s}\n' "$1" "$2"; }
P true "$RUN" > $QA/k/bool.yaml; P .inf "$RUN" > $QA/k/inf.yaml; P 12.5 "$RUN" > $QA/k/ok.yaml; P 12.5 7 > $QA/k/run7.yaml
echo '[1, 2]' > $QA/k/list.yaml
printf 'points:\n  - 5\n' > $QA/k/notmap.yaml
printf 'points:\n  - {id: X1, measured_tok_s: 12.5, source: "${oc.env:QA}", grade: A, run: {policy: llamacpp}}\n' > $QA/k/env.yaml
touch $QA/k/stamp
'''

B, P = "BAD", "POOR"
VAL = "python -m sim validate gen_tokens=8 n_jobs=1"
BE = "python -m sim breakeven gen_tokens=16 map=false 'acceptances=[0.5,0.9]'"
CAL = "python -m sim calibrate runtime=llama_cpp gen_tokens=8 n_jobs=1 loso=false min_points=1"
CASES_INPUTS = [
    ("K1", B, "run64 model=hf:$QA/k/heads0 out=$QA/o/k1", "ls $QA/o/k1 2>&1"),
    ("K2", B, "run64 model=hf:$QA/k/hid out=$QA/o/k2", "ls $QA/o/k2 2>&1"),
    ("K3", B, "run64 model=hf:$QA/k/vocab out=$QA/o/k3", "ls $QA/o/k3 2>&1"),
    ("K4", P, "timeout 200 python -m sim run policy=llamacpp gen_tokens=8 model=hf:$QA/k/e7 out=$QA/o/k4", None),
    ("K5", P, "run64 model=hf:$QA/k/badjson out=$QA/o/k5", None),
    ("K6", B, f"{VAL} points=$QA/k/bool.yaml out=", None),
    ("K7", B, f"{CAL} points=$QA/k/bool.yaml write=true", "find conf/runtime -newer $QA/k/stamp | wc -l"),
    ("K8", B, f"{VAL} points=$QA/k/inf.yaml out=", None),
    ("K9", P, f"{VAL} points=$QA/k/list.yaml out=", None),
    ("K10", P, f"{VAL} points=$QA/k/notmap.yaml out=", None),
    ("K11", P, f"{VAL} points=$QA/k/run7.yaml out=", None),
    ("K12", B, f"{VAL} points=$QA/k/env.yaml out=$QA/o/k12", "ls $QA/o/k12 2>&1"),
    ("K13", B, f"{BE} gamma_min=0 out=$QA/o/k13", "ls $QA/o/k13 2>&1"),
    ("K14", B, f"{BE} 'sd_policies=[llamacpp]' out=$QA/o/k14", "ls $QA/o/k14 2>&1"),
    ("K15", B, f"{BE} 'ar_policies=[moespac]' out=$QA/o/k15", "ls $QA/o/k15 2>&1"),
    ("K16", B, f"{CAL} points=$QA/k/ok.yaml write=maybe", "find conf/runtime -newer $QA/k/stamp | wc -l"),
    ("K17", B, f"{VAL} points=$QA/k/ok.yaml json=maybe out=", None),
    ("K18", B, "python -m traces stats trace=$QA/imp/mixtral json=yes", None),
    ("K19", P, f"{VAL} points=$QA/k/ok.yaml out=$QA/afile.txt", None),
    ("K20", B, "run64 +hydra.callbacks.x._target_=shutil.copyfile +hydra.callbacks.x.src=$QA/afile.txt "
               "+hydra.callbacks.x.dst=$QA/k/stolen out=$QA/o/k20", "ls $QA/k/stolen 2>&1"),
    ("K21", P, "run64 link.latency_us=.inf out=$QA/o/k21", None),
    ("K22", P, "run64 runtime.step_overhead_us=.inf out=$QA/o/k22", None),
    ("K23", P, "run64 draft.params=.inf out=$QA/o/k23", None),
    ("K24", B, "run64 hardware.cpu_threads=0 out=$QA/o/k24", None),
]


def _err(*keys: str):
    """Refused with exit 2 and a one-line error naming every one of ``keys``."""
    return lambda r: r["rc"] == 2 and r["first"].startswith("error") and all(k in r["first"] for k in keys)


def _nothing(probe: str):
    return lambda r: "No such file" in r.get("probe", "") or r.get("probe", "").strip() == probe


FIXED_INPUTS = {
    "K1": _err("config.json", "num_attention_heads=0", "1..4096"),
    "K2": _err("config.json", "hidden_size=2048.5", "integer"),
    "K3": _err("config.json", "vocab_size=-5", "1.."),
    "K4": lambda r: _err("config.json", "num_experts=10000000", "0..4096")(r) and r["wall_s"] < 30,
    "K5": _err("badjson/config.json", "JSON"),
    "K6": _err("bool.yaml", "X1", "measured_tok_s", "True"),
    "K7": lambda r: _err("bool.yaml", "measured_tok_s")(r) and r["probe"].strip() == "0",
    "K8": _err("inf.yaml", "X1", "measured_tok_s", "inf"), "K9": _err("list.yaml", "mapping"),
    "K10": _err("notmap.yaml", "points[0]", "mapping"), "K11": _err("run7.yaml", "X1", "'run'"),
    "K12": lambda r: _err("env.yaml", "interpolation")(r) and "fidelity" not in r["probe"],
    "K13": lambda r: _err("gamma_min=0", "1..12")(r) and "breakeven.json" not in r["probe"],
    "K14": lambda r: _err("sd_policies", "'llamacpp'", "speculative policies:")(r)
    and "breakeven.json" not in r["probe"],
    "K15": lambda r: _err("ar_policies", "'moespac'", "autoregressive policies:")(r)
    and "breakeven.json" not in r["probe"],
    "K16": lambda r: _err("write='maybe'", "true or false")(r) and r["probe"].strip() == "0",
    "K17": _err("json='maybe'", "true or false"), "K18": _err("json='yes'", "true or false"),
    "K19": _err("out=", "afile.txt", "is a file"),
    "K20": lambda r: _err("_target_")(r) and "No such file" in r["probe"],
    "K21": _err("latency_us", "finite"), "K22": _err("step_overhead_us", "finite"),
    "K23": _err("params", "finite"), "K24": _err("cpu_threads=0", ">= 1"),
}
