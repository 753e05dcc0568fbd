#!/usr/bin/env bash
# GPU validation on one machine: profile this machine, run MoE-SpAc and
# llama.cpp-w/SD for real on a synthetic model of Qwen3-30B-A3B's shape, replay the captured
# traces in the simulator with the measured tables, print the diff tables.
#
#   scripts/gpu_validate.sh [OUT]          (default OUT=out/gpu_validate)
#
# Needs no network and no model weights: the models are random weights of the real shape built
# on the GPU. Installs nothing. Sized to finish in under 8 minutes on one H200; shrink with the
# environment variables below on smaller GPUs. Everything lands in OUT: machine.txt,
# hardware.yaml (the profile), check.log (float32 losslessness on the GPU), validate/ (real
# runs, traces, results.parquet, summary.txt, validation.csv) and sync/ (decision counts).
set -euo pipefail

OUT=${1:-out/gpu_validate}
PY=${PYTHON:-python}
LAYERS=${LAYERS:-8}              # MoE layers of the synthetic target (Qwen3-30B-A3B has 48)
DRAFT_LAYERS=${DRAFT_LAYERS:-28} # the draft has Qwen3-1.7B's shape
TOKENS=${TOKENS:-64}             # new tokens per prompt
PROMPTS=${PROMPTS:-2}
RATIO=${RATIO:-0.17}             # the paper's cache ratio
GAMMA=${GAMMA:-8}
EXTRA=${EXTRA:-}                 # extra model keys, e.g. "hidden=64 moe_intermediate=32 vocab=512" (CPU smoke test)
PROFILE_ARGS=${PROFILE_ARGS:-}   # e.g. "fast=true"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
MODEL="synthetic=qwen3_30b_a3b layers=$LAYERS draft_layers=$DRAFT_LAYERS $EXTRA"
step() { echo; echo "== $* ($(date +%T))"; }

step "machine"
{
  date -Is; hostname; nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv 2>/dev/null || true
  "$PY" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
  lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)|Thread' || true
} | tee "$OUT/machine.txt"

step "profile (expert tables, link, draft and layer overheads)"
"$PY" -m real profile $MODEL $PROFILE_ARGS gamma=$GAMMA out="$OUT/hardware.yaml" name=gpu_validate 2>&1 | tee "$OUT/profile.log"

step "losslessness on the GPU (float32, 2 layers: tokens equal plain greedy)"
"$PY" -m real run synthetic=qwen3_30b_a3b layers=2 draft_layers=4 $EXTRA dtype=float32 policy=moespac \
    cache_ratio=$RATIO gamma=$GAMMA max_new_tokens=32 prompts=tiny:1 check=true \
    hardware="$OUT/hardware.yaml" 2>&1 | tee "$OUT/check.log"

step "real vs simulated: moespac and llamacpp_sd (asynchronous, timed)"
"$PY" -m real validate $MODEL hardware="$OUT/hardware.yaml" policies=moespac,llamacpp_sd \
    cache_ratio=$RATIO gamma=$GAMMA max_new_tokens=$TOKENS prompts=tiny:$PROMPTS \
    out="$OUT/validate" 2>&1 | tee "$OUT/validate.log"

step "decision counts in synchronous mode (must be identical)"
"$PY" -m real validate $MODEL hardware="$OUT/hardware.yaml" policies=moespac sync=true \
    cache_ratio=$RATIO gamma=$GAMMA max_new_tokens=24 prompts=tiny:1 warmup=0 \
    out="$OUT/sync" 2>&1 | tee "$OUT/sync.log"

step "done: $OUT/validate/summary.txt"
cat "$OUT/validate/summary.txt"
