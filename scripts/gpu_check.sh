#!/usr/bin/env bash
# The GPU check (docs/operations.md, "Accelerators"): ResNet-50 on synthetic ImageNet-shaped images in
# bfloat16 at e=4, then the default workload, a few hundred steps each, through the profiler: steps/s, R and
# its advice, as Markdown in $OUT/gpu_check.md. Run where a GPU is at hand (never a test dependency):
#   pip install -e '.[cuda]' && scripts/gpu_check.sh
# STEPS sets the steps per run (300); STEPS=20 BATCH=32 runs the same commands on a CPU as a dry run.
set -euo pipefail
STEPS=${STEPS:-300}
OUT=${OUT:-gpu_check}
PY=${PY:-.venv/bin/python}
BATCH=${BATCH:-}
mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1 || true)
{
  echo "# GPU check on ${gpu:-no GPU (a dry run)}, $(date -u +%Y-%m-%d)"
  echo
  for run in "workload=resnet50 workload.dataset=synthetic_images trainer.precision=bfloat16 echo.factor=4" \
             "echo.factor=1"; do
    args=($run trainer.max_steps=$STEPS)
    [[ -n "$BATCH" ]] && args+=(workload.batch_size=$BATCH workload.eval_batch_size=$BATCH)
    echo "## python -m echo_experiments.profile ${args[*]}"
    echo
    echo '```'
    start=$(date +%s)
    "$PY" -m echo_experiments.profile "${args[@]}" 2>&1 | grep -v "^\[" || echo "(failed: exit ${PIPESTATUS[0]})"
    echo "($(( $(date +%s) - start )) s in all, compilation and data preparation included)"
    echo '```'
    echo
  done
} | tee "$OUT/gpu_check.md"
