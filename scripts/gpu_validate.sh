#!/usr/bin/env bash
# GPU validation in one call of at most 8 minutes on one H100/H200, wheels installed included.
#
# Steps (scripts/gpu_validate.py, each under a time budget, most valuable first): machine facts;
# pinned and pageable H2D GB/s by size (links.csv); one expert's time on the GPU and the host CPU at
# the shapes of Qwen3-30B-A3B and DeepSeek-V2-Lite (experts.csv); `real profile` (hardware.yaml);
# real vs simulated tok/s of moespac, llamacpp_sd, adaspec and hybrimoe at cache ratios 0.17 and
# 0.5 on random weights of Qwen3-30B-A3B's shape with 4 MoE layers (validate_r*/, tps.csv), the
# speedup of moespac over llamacpp_sd real vs simulated (speedup.csv); decision counts in
# synchronous mode (sync/, sync.csv: must be identical); float32 tokens equal to plain greedy
# (check.txt). status.csv and summary.txt say what ran; everything lands in OUT.
#
# The GPU machine has no registry and ../shared does not travel to it: copy the wheels into the
# ignored folder .gpuwheels/ of the checkout first, then carry it:
#
#   mkdir -p .gpuwheels && cp /work/shared/wheels-gpu/*.whl .gpuwheels/
#   run(command='scripts/gpu_validate.sh "$OUT"', carry=[".gpuwheels"], timeout_s=540)
#
# (the device tool's `run`: $OUT is its output folder, which comes back). Locally:
#   scripts/gpu_validate.sh out/gpu_validate
#   GPU_VALIDATE_DRY=1 scripts/gpu_validate.sh /tmp/gv    # the same steps on the CPU, tiny shapes
# BUDGET_S (default 420) is the time after which no new step starts; PYTHON picks the interpreter.
set -euo pipefail

OUT=${1:-${OUT:-out/gpu_validate}}
PY=${PYTHON:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD/.site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PY" -c "import simpy, hydra, omegaconf" 2>/dev/null; then
  if ! ls .gpuwheels/*.whl >/dev/null 2>&1; then
    echo "missing simpy/hydra-core/omegaconf and no wheels in .gpuwheels/ (see the header)" >&2
    exit 2
  fi
  echo "== installing $(ls .gpuwheels/*.whl | wc -l) wheel(s) from .gpuwheels/ into .site/"
  "$PY" -m pip install -q --no-index --no-deps --target .site .gpuwheels/*.whl
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current \
  --format=csv > "$OUT/nvidia-smi.csv" 2>/dev/null || true

"$PY" scripts/gpu_validate.py "$OUT" 2>&1 | tee "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
