"""The BAD and POOR cases of the reliability QA pass, as shell commands (see docs/reliability.md).

Each case: id, the QA verdict, a bash command run in the project root with the QA set-up's shell
functions defined, and an optional probe (a bash command whose output shows what was left behind:
rows, files, modes). ``$QA`` is the scratch folder. Expectations after the fix are in ``FIXED``.
"""
from __future__ import annotations

SETUP = r'''
mkdir -p $QA/real $QA/tr $QA/o $QA/tk $QA/emptytr $QA/imp
cp -r $SHARED/real-traces/* $QA/real/
echo hello > $QA/afile.txt
python -m traces synth model=qwen3_30b_a3b workload=gsm8k tokens=128 seed=0 out=$QA/tr/good.npz
python - <<PY
import json, os
import numpy as np
os.chdir("$QA/tr")
z = np.load("good.npz"); d = {k: z[k] for k in z.files}; meta = json.loads(str(d["meta"]))
M = lambda **kw: np.array(json.dumps(dict(meta, **kw)))
open("random.npz", "wb").write(np.random.default_rng(0).bytes(5000))
np.savez("short.npz", meta=M(tokens=10), experts=d["experts"][:10], alt_experts=d["alt_experts"][:10])
np.save("plain.npy", d["experts"]); os.replace("plain.npy", "plain.npz")
PY
python -m traces import source=$QA/real/Mario928-speculative-moe/mixtral_decode_topk.npz out=$QA/imp/mixtral
R=$QA/real/Mario928-speculative-moe/gsm8k_2_routing.jsonl
sed '11s/"experts": \[[0-9]*,/"experts": [-3,/' $R > $QA/tr/negexp_routing.jsonl
sed 's/"gating_probs": \[[^]]*\]/"gating_probs": [2.0, -1.0]/' $R > $QA/tr/badprob_routing.jsonl
sed '13s/"token_idx": [0-9]*/"token_idx": 99999/' $R > $QA/tr/bigtok_routing.jsonl
mkdir -p $QA/mixed2 $QA/o/fake_run/traces
cp $QA/imp/mixtral/gsm8k_p0.npz $QA/tr/good.npz $QA/mixed2/
cp $QA/tr/good.npz $QA/o/fake_run/traces/
printf '{"question": "What is 2+2?"}\n{"question": "Name a color."}\n' > $QA/bad_prompts.jsonl
python -m real run target=tiny:qwen3_moe draft=tiny:dense policy=moespac cache_ratio=0.25 prompts=tiny:2 gamma=4 max_new_tokens=16 out=$QA/o/re0 quiet=true
'''
# J16's file in the QA list had an unterminated second line; the point of the case is line 1
# ({"question": ...} refused although prompt_field defaults to question), so both lines are valid here.

FUNCS = r'''
run64()    { python -m sim run policy=moespac gen_tokens=64 "$@"; }
sw2()      { python -m sim sweep 'experiment.policies=[moespac,llamacpp]' 'experiment.workloads=[gsm8k]' gen_tokens=64 n_jobs=1 "$@"; }
sw12()     { python -m sim sweep 'experiment.policies=[moespac,llamacpp,llamacpp_sd,hybrimoe]' 'experiment.workloads=[gsm8k,alpaca,humaneval]' gen_tokens=128 "$@"; }
gl()       { python -m sim sweep 'experiment.policies=[moespac,llamacpp]' 'experiment.workloads=[gsm8k]' n_jobs=1 "$@"; }
realtiny() { python -m real run target=tiny:qwen3_moe draft=tiny:dense prompts=tiny:1 gamma=4 max_new_tokens=8 warmup=0 "$@"; }
rows()     { [ -f "$1" ] || { echo "no results file"; return; }; python -c "import sys, pandas as pd; d = pd.read_parquet(sys.argv[1]); print(len(d), 'rows;', d[sys.argv[2].split(',')].to_dict('records'))" "$@"; }
mean()     { [ -f "$1" ] || { echo "no results file"; return; }; python -c "import sys, pandas as pd; d = pd.read_parquet(sys.argv[1]); print(len(d), 'rows; mean tps', round(d.tps.mean(), 4))" "$@"; }
'''

P = "POOR"
B = "BAD"
CASES = [
    ("A13", P, "python -m sim sweep experiment.policies=moespac 'experiment.workloads=[gsm8k]' gen_tokens=64 n_jobs=1 out=$QA/o/a13", "rows $QA/o/a13/results.parquet policy"),
    ("A14", P, "python -m sim sweep 'experiment.policies=[moespac]' experiment.workloads=gsm8k gen_tokens=64 n_jobs=1 out=$QA/o/a14", "rows $QA/o/a14/results.parquet workload"),
    ("A15", P, "python -m sim sweep 'experiment.policies=[]' 'experiment.workloads=[gsm8k]' gen_tokens=64 n_jobs=1 out=$QA/o/a15", "ls $QA/o/a15 2>&1"),
    ("A17", P, "python -m sim sweep 'experiment.policies=[moespac,llamacpp]' 'experiment.workloads=[gsm8k]' gen_tokens=64 n_jobs=1 -m cache_ratio=0.1,0.17 out=$QA/o/a17", None),
    ("A18", P, "sw2 '+experiment.grid={gamma:[4,-1,8]}' out=$QA/o/a18", "ls $QA/o/a18 2>&1"),
    ("B5", P, "run64 cache_ratio=abc out=$QA/o/b5", None),
    ("B6", P, "run64 cache_ratio=null out=$QA/o/b6", None),
    ("B9", P, "run64 gamma=2.5 out=$QA/o/b9", "rows $QA/o/b9/results.parquet gamma"),
    ("B10", P, "run64 gen_tokens=0 out=$QA/o/b10", None),
    ("B11", P, "run64 gen_tokens=-5 out=$QA/o/b11", None),
    ("B12", P, "run64 gen_tokens=64.7 out=$QA/o/b12", None),
    ("B16", B, "run64 context=-2000000 cache_ratio=0.6 out=$QA/o/b16", "ls $QA/o/b16 2>&1"),
    ("B17", B, "run64 prompt_tokens=-10 out=$QA/o/b17", "ls $QA/o/b17 2>&1"),
    ("B19", B, "run64 draft=none out=$QA/o/b19", "ls $QA/o/b19 2>&1"),
    ("B20", P, "sw2 n_jobs=0 out=$QA/o/b20", "ls $QA/o/b20 2>&1"),
    ("B21", P, "sw2 n_jobs=abc out=$QA/o/b21", None),
    ("B23", P, "sw2 n_jobs=1.5 out=$QA/o/b23", None),
    ("B24", P, "sw2 out=$QA/o/b24 >/dev/null 2>&1; sw2 resume=no out=$QA/o/b24", None),
    ("C2", P, "run64 +policy.foo=1 out=$QA/o/c2", None),
    ("C4", P, "run64 cache_ration=0.2 out=$QA/o/c4", None),
    ("C5", B, "run64 +cache_ration=0.2 out=$QA/o/c5", "ls $QA/o/c5 2>&1"),
    ("C7", P, "run64 policy.K=-3 out=$QA/o/c7", None),
    ("C8", P, "python -m sim run policy=llamacpp policy.gpu_layers=middle gen_tokens=64 out=$QA/o/c8", None),
    ("C9", P, "run64 policy.stat_decay=abc out=$QA/o/c9", None),
    ("D3", P, "python -m traces stats trace=$QA/tr/random.npz", None),
    ("D18", P, "python -m traces stats trace=$QA/tr/plain.npz; echo \"rc1=$?\"; run64 trace=$QA/tr/plain.npz out=$QA/o/d18", None),
    ("D21", P, "run64 trace=$QA/tr/short.npz out=$QA/o/d21", None),
    ("D27", B, "run64 trace=$QA/imp/mixtral/humaneval_p1.npz model=mixtral_8x7b cache_ratio=0.1 out=$QA/o/d27", "rows $QA/o/d27/results.parquet workload"),
    ("E6", P, "python -m traces synth tokens=64 out=$QA/tr", None),
    ("E7", P, "python -m traces synth tokens=64 out=$QA/afile.txt/sub.npz", None),
    ("E8", B, "timeout 60 python -m traces synth tokens=10000000 out=$QA/tr/huge.npz", "ls -A $QA/tr | grep -c huge"),
    ("E10", P, "python -m traces stats trace=$QA/mixed2", None),
    ("E12", B, "python -m traces stats trace=$QA/imp/mixtral 'slots=[0,-4,1000]'", None),
    ("E13", P, "python -m traces stats trace=$QA/imp/mixtral slots=abc", None),
    ("E14", P, "python -m traces stats trace=$QA/imp/mixtral figure=$QA/nodir/x/fig.png", None),
    ("E15", P, "python -m traces stats trace=$QA/imp/mixtral json=maybe", None),
    ("E27", P, "python -m traces import source=$QA/tr/negexp_routing.jsonl out=$QA/imp/e27", "ls $QA/imp/e27 2>&1"),
    ("E28", P, "python -m traces import source=$QA/tr/badprob_routing.jsonl out=$QA/imp/e28", "ls $QA/imp/e28 2>&1"),
    ("E29", B, "python -m traces import source=$QA/tr/bigtok_routing.jsonl out=$QA/imp/e29", "ls $QA/imp/e29 2>&1"),
    ("E32", P, "python -m traces import source=$QA/real/Mario928-speculative-moe/mixtral_decode_topk.npz out=$QA/afile.txt", None),
    ("E33", P, "python -m traces import source=$QA/real/Mario928-speculative-moe/mixtral_decode_topk.npz out=$QA/imp/one.npz", "ls $QA/imp 2>&1 | tr '\\n' ' '"),
    ("F1", P, "run64 out=$QA/afile.txt", None),
    ("F2", P, "sw2 out=$QA/afile.txt", None),
    ("F3", P, "run64 out=/proc/qa_out", None),
    ("F4", P, "sw2 out=/dev/null/sub", None),
    ("F7", P, "(umask 0002; python -m traces synth tokens=32 out=$QA/tk/um.npz && python -m traces stats trace=$QA/tk/um.npz figure=$QA/tk/um.png >/dev/null && python -m sim run policy=moespac gen_tokens=32 out=$QA/tk/umrun >/dev/null)", "stat -c '%A %n' $QA/tk/um.* $QA/tk/umrun/* | tr '\\n' ' '"),
    ("F8", P, "python -m traces synth tokens=60000 out=$QA/tk/big.npz & P=$!; for i in $(seq 600); do ls -A $QA/tk | grep -q '^\\.big' && break; sleep 0.1; done; kill -TERM $P; wait $P; echo rc=$? >&2; python -m traces synth tokens=16 out=$QA/tk/small.npz", "ls -A $QA/tk | grep -c 'tmp$'"),
    ("F9", P, "run64 out=$QA/o/f9 >/dev/null 2>&1; run64 out=$QA/o/f9 >/dev/null 2>&1; run64 gen_tokens=128 out=$QA/o/f9", "rows $QA/o/f9/results.parquet gen_tokens,tps"),
    ("G6", B, "sw12 n_jobs=1 out=$QA/o/stale >/dev/null 2>&1; sw12 n_jobs=1 gen_tokens=64 out=$QA/o/stale", "rows $QA/o/stale/results.parquet gen_tokens | cut -c1-60; grep gen_tokens $QA/o/stale/config.yaml"),
    ("G7", B, "sw12 n_jobs=1 out=$QA/o/stale7 >/dev/null 2>&1; sw12 n_jobs=1 hardware.pcie_h2d_gbs=50 out=$QA/o/stale7; sw12 n_jobs=1 hardware.pcie_h2d_gbs=50 out=$QA/o/fresh50 >/dev/null 2>&1", "mean $QA/o/stale7/results.parquet; mean $QA/o/fresh50/results.parquet"),
    ("G8", B, "sw12 n_jobs=1 out=$QA/o/stale8 >/dev/null 2>&1; sw12 n_jobs=1 acceptance=0.3 out=$QA/o/stale8", "mean $QA/o/stale8/results.parquet"),
    ("G9", B, "gl '+experiment.grid={gen_tokens:[64]}' out=$QA/o/glen >/dev/null 2>&1; gl '+experiment.grid={gen_tokens:[64,128,192]}' out=$QA/o/glen", "rows $QA/o/glen/results.parquet policy,gen_tokens"),
    ("G10", B, "sw12 n_jobs=1 out=$QA/o/g10a >/dev/null 2>&1; sw12 n_jobs=1 hardware.pcie_h2d_gbs=50 out=$QA/o/g10b >/dev/null 2>&1; mkdir -p $QA/o/combo && cp -r $QA/o/g10a $QA/o/combo/a && cp -r $QA/o/g10b $QA/o/combo/b && python -m analysis report results=$QA/o/combo out=$QA/o/rep_g10 timeline=off", "grep -ci 'rtx4090_pcie4\\[pcie_h2d_gbs=50' $QA/o/rep_g10/report.md"),
    ("G11", P, "sw12 n_jobs=1 out=$QA/o/conc > $QA/o/conc1.log 2>&1 & sleep 0.3; sw12 n_jobs=1 out=$QA/o/conc; wait; tail -1 $QA/o/conc1.log", "rows $QA/o/conc/results.parquet policy | cut -c1-8"),
    ("G16", P, "mkdir -p $QA/o/schema1 && sw2 out=$QA/o/schema1src >/dev/null 2>&1 && python -c \"import pandas as pd; pd.read_parquet('$QA/o/schema1src/results.parquet').drop(columns=['seed']).to_parquet('$QA/o/schema1/results.parquet')\" && sw2 out=$QA/o/schema1", None),
    ("G17", P, "mkdir -p $QA/o/isdir/results.parquet; sw2 out=$QA/o/isdir", None),
    ("H1", P, "python -m sim sweep -m 'experiment.policies=[moespac,llamacpp]' 'experiment.workloads=[gsm8k]' gen_tokens=64 n_jobs=1 cache_ratio=0.1,abc,0.17 out=$QA/o/h1", "find $QA/o/h1 -name results.parquet | wc -l"),
    ("H2", B, "python -m sim sweep -m 'experiment.policies=[moespac,llamacpp]' 'experiment.workloads=[gsm8k]' gen_tokens=64 n_jobs=1 cache_ratio=0.1,abc,0.17 hydra/launcher=joblib hydra.launcher.n_jobs=2 out=$QA/o/h2", "find $QA/o/h2 -name results.parquet | wc -l"),
    ("H3", P, "python -m sim sweep -m 'experiment.policies=[moespac,llamacpp]' 'experiment.workloads=[gsm8k]' gen_tokens=64 n_jobs=1 cache_ratio=0.1,0.17 out=$QA/o/h3", "find $QA/o/h3 -name results.parquet | sed \"s|$QA||\" | tr '\\n' ' '"),
    ("I4", B, "sw2 n_jobs=-1 out=$QA/o/b22 >/dev/null 2>&1; python -m analysis report results=$QA/o/b22 out=$QA/o/rep_i4 timeline=off", "grep -c 'average of 7' $QA/o/rep_i4/report.md"),
    ("I11", P, "sw2 out=$QA/o/i11 >/dev/null 2>&1; python -m analysis report results=$QA/o/i11 out=$QA/o/rep_i11 timeline=simulate timeline_workload=foo", None),
    ("I12", P, "python -m analysis report results=$QA/o/re0 out=$QA/afile.txt timeline=off; sw2 out=$QA/o/i12 >/dev/null 2>&1; python -m analysis report results=$QA/o/i12 out=$QA/afile.txt timeline=off", None),
    ("J13", B, "realtiny context=-5000000 out=$QA/o/j13", "ls $QA/o/j13 2>&1"),
    ("J16", P, "realtiny prompts=$QA/bad_prompts.jsonl", None),
    ("J21", B, "python -m real run target=tiny:qwen3_moe draft=tiny:dense policy=moespac cache_ratio=0.25 prompts=tiny:2 gamma=4 max_new_tokens=16 out=$QA/o/j21 quiet=true; python -m real run target=tiny:qwen3_moe draft=tiny:dense policy=llamacpp_sd cache_ratio=0.25 prompts=tiny:1 gamma=4 max_new_tokens=16 warmup=0 out=$QA/o/j21", "rows $QA/o/j21/results.parquet policy"),
    ("J24", P, "python -m real validate run=$QA/o/re0 policies=llamacpp out=$QA/o/j24", None),
    ("J25", P, "python -m real validate run=$QA/o/fake_run", None),
    ("J28", B, "python -m real validate run=$QA/o/j21 out=$QA/o/j28", None),
    ("J29", P, "python -m real profile fast=true hidden=64 moe_intermediate=32 vocab=256 out=$QA/afile.txt/hw.yaml", None),
]


def _err(key: str, rc: int = 2):
    """Refused with exit ``rc`` and a one-line error naming ``key``."""
    return lambda r: r["rc"] == rc and r["first"].startswith("error") and key in r["first"]


def _probe(text: str, rc=None):
    return lambda r: text in r.get("probe", "") and (rc is None or r["rc"] == rc)


# What each case must show after the fix (besides: no traceback).
FIXED = {
    "A13": _probe("'policy': 'moespac'", 0), "A14": _probe("'workload': 'gsm8k'", 0),
    "A15": _err("experiment.policies"), "A17": lambda r: r["rc"] == 0, "A18": _err("gamma=-1"),
    "B5": _err("cache_ratio"), "B6": _err("cache_ratio"), "B9": _err("gamma=2.5"), "B10": _err("gen_tokens=0"),
    "B11": _err("gen_tokens=-5"), "B12": _err("gen_tokens=64.7"),
    "B16": lambda r: _err("context=-2000000")(r) and "No such file" in r["probe"],
    "B17": lambda r: _err("prompt_tokens=-10")(r) and "No such file" in r["probe"],
    "B19": lambda r: _err("draft=none")(r) and "results.parquet" not in r["probe"],
    "B20": _err("n_jobs=0"), "B21": _err("n_jobs='abc'"), "B23": _err("n_jobs=1.5"), "B24": _err("resume='no'"),
    "C2": _err("'foo'"), "C4": _err("did you mean cache_ratio"),
    "C5": lambda r: _err("did you mean cache_ratio")(r) and "results.parquet" not in r["probe"],
    "C7": _err("policy.K=-3"), "C8": _err("policy.gpu_layers"), "C9": _err("policy.stat_decay"),
    "D3": lambda r: _err("random.npz")(r) and "allow_pickle" not in r["first"], "D18": _err("single .npy"),
    "D21": lambda r: r["rc"] == 0 and "note: the trace holds 10 tokens" in r["tail"],
    "D27": _probe("'workload': 'humaneval'", 0),
    "E6": _err("out="), "E7": _err("out="), "E8": lambda r: _err("tokens")(r) and r["probe"].strip() == "0",
    "E10": _err("one model"), "E12": _err("slots=-4"), "E13": _err("slots"), "E14": lambda r: r["rc"] == 0,
    "E15": _err("json"), "E27": _err("line 11"), "E28": _err("gating_probs"), "E29": _err("line 13"),
    "E32": _err("out="), "E33": lambda r: _err("out=")(r) and "one.npz" not in r["probe"],
    "F1": _err("out="), "F2": _err("out="), "F3": _err("out="), "F4": _err("out="),
    "F7": lambda r: r["rc"] == 0 and "-rw-------" not in r["probe"] and "-rw-rw-r--" in r["probe"],
    "F8": lambda r: r["probe"].strip() == "0" and "rc=143" in r["tail"],
    "F9": lambda r: r["probe"].startswith("1 rows") and _err("gen_tokens")(r),
    "G6": lambda r: _err("gen_tokens")(r) and "gen_tokens: 128" in r["probe"],
    "G7": lambda r: "hardware.pcie_h2d_gbs" in r["tail"] and "error" in r["tail"],
    "G8": _err("acceptance"), "G9": _err("experiment.grid.gen_tokens"),
    "G10": lambda r: r["rc"] == 0, "G11": lambda r: "another process" in r["tail"] and r["probe"].startswith("12 rows"),
    "G16": _err("seed"), "G17": _err("is a folder"),
    "H1": lambda r: _err("cache_ratio='abc'")(r), "H2": lambda r: _err("cache_ratio='abc'")(r),
    "H3": lambda r: r["rc"] == 0 and "out=" not in r["probe"],
    "I4": lambda r: r["rc"] == 0 and r["probe"].strip() == "0",
    "I11": _err("timeline_workload", 1), "I12": lambda r: r["first"].startswith("error") and "out=" in r["first"],
    "J13": lambda r: _err("context=-5000000")(r) and "No such file" in r["probe"],
    "J16": lambda r: "needs a non-empty" not in r["first"], "J21": lambda r: _err("out=")(r) and "'moespac'" in r["probe"],
    "J24": _err("policies=llamacpp"), "J25": _err("meta.policy"), "J28": lambda r: r["rc"] == 0 and "llamacpp_sd" not in r["tail"],
    "J29": _err("out="),
}


# The second bad-input pass (K1-K24): its cases and their expected outcomes join the lists above.
from qa_cases_inputs import CASES_INPUTS, FIXED_INPUTS  # noqa: E402

CASES += CASES_INPUTS
FIXED.update(FIXED_INPUTS)
