#!/usr/bin/env bash
# The GPU check (docs/operations.md, "Accelerators"): ResNet-50 on synthetic ImageNet-shaped images in
# bfloat16 at e=4, then the default workload, a few hundred steps each, through the profiler: steps/s, R and
# its advice, as Markdown in $OUT/gpu_check.md. Run where a GPU is at hand (never a test dependency):
#   pip install -e '.[cuda]' && scripts/gpu_check.sh
# STEPS sets the steps per run (300). DRY_RUN=1 runs the same commands on a CPU in minutes: 10 steps, batches of
# 8, 64-pixel images and a shuffle buffer of 64 (the same model and code paths, nothing else smaller).
# Each command is bounded by TIMEOUT seconds (600), its children ended with it; its log lines go to stderr as it
# runs (the progress), the Markdown holds its answer.
set -euo pipefail
DRY_RUN=${DRY_RUN:-}
STEPS=${STEPS:-$([[ -n "$DRY_RUN" ]] && echo 10 || echo 300)}
BATCH=${BATCH:-$([[ -n "$DRY_RUN" ]] && echo 8 || true)}
TIMEOUT=${TIMEOUT:-600}
OUT=${OUT:-gpu_check}
for name in STEPS TIMEOUT ${BATCH:+BATCH}; do
  [[ "${!name}" =~ ^[1-9][0-9]*$ ]] || { echo "error: $name=${!name} is not allowed: an integer >= 1" >&2; exit 2; }
done
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1 || true)
small=()
[[ -n "$DRY_RUN" ]] && small=(workload.augment.image_size=64 workload.shuffle_buffer=64)
{
  echo "# GPU check on ${gpu:-no GPU (a dry run)}, $(date -u +%Y-%m-%d)"
  echo
  n=0
  for run in "workload=resnet50 workload.dataset=synthetic_images workload.eval_split=test trainer.precision=bfloat16 echo.factor=4" \
             "echo.factor=1"; do
    n=$((n + 1))
    args=($run trainer.max_steps=$STEPS)
    [[ -n "$BATCH" ]] && args+=(workload.batch_size=$BATCH workload.eval_batch_size=$BATCH)
    [[ "$run" == workload=resnet50* ]] && args+=("${small[@]}")
    echo "running $n of 2: python -m echo_experiments.profile ${args[*]} (at most $TIMEOUT s)" >&2
    echo "## python -m echo_experiments.profile ${args[*]}"
    echo
    echo '```'
    start=$(date +%s)
    # timeout signals the command's whole process group; a command still there 30 s later is killed. The command
    # ends itself at its start-up deadline (STARTUP_DEADLINE_S, core/signals.py) at the latest; killed at that same
    # moment on a loaded machine, it read as exit 137 where the timeout was the cause.
    status=0
    timeout --kill-after=30 "$TIMEOUT" "$PY" -m echo_experiments.profile "${args[@]}" 2>&1 \
      | tee /dev/stderr | grep -v "^\[" || status=${PIPESTATUS[0]}
    [[ $status -ne 0 ]] && echo "(failed: exit $status$([[ $status -eq 124 ]] && echo ", over $TIMEOUT s"))"
    echo "($(( $(date +%s) - start )) s in all, compilation and data preparation included)"
    echo '```'
    echo
  done
} | tee "$OUT/gpu_check.md"
