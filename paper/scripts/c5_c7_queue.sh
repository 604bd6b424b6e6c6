#!/usr/bin/env bash
# The sweeps that decide C5, C6 and C7 again on runs that name their machine (docs/protocol.md, "C5, C6 and C7
# again"), in their order, study by study, two jobs at a time (fresh examples are compared, not seconds: other
# work may share the machine). Each step is resumable: the same command again finishes what is missing. The
# presets' headers (and the folders' NOTES.md) give the commands and hours. From a checkout of main:
#   paper/scripts/c5_c7_queue.sh            # FROM=c6 or FROM=c5 to begin later; STUDIES="2 3 4" for some studies
# A study begun on one CPU model is finished on that model (a run refuses to resume on another). Archive each
# study as it finishes: make archive SWEEP=multirun/<preset>/<workload>.
set -euo pipefail
PY=${PY:-.venv/bin/python}
FROM=${FROM:-c7}
TWO="hydra/launcher=joblib hydra.launcher.n_jobs=2"
step() { echo "== $1 study $2 $(date -u +%FT%TZ)"; }
run() { # shellcheck disable=SC2086
  $PY -m echo_experiments -m "$@" $TWO; }
if [ "$FROM" = c7 ]; then
  for S in ${STUDIES:-0 1 2}; do
    step c7 "$S"
    run experiment=fixed_budget_cpu workload=fashion_mnist tuning.study="$S" \
      hydra.sweep.dir=multirun/fixed_budget_cpu-rerun/fashion_mnist
  done
  FROM=c6; STUDIES=""
fi
if [ "$FROM" = c6 ]; then
  for S in ${STUDIES:-0 1 2 3 4}; do
    step c6 "$S"
    run experiment=lm_shuffle_buffer_fine_cpu tuning.study="$S"
    run experiment=lm_shuffle_buffer_fine_cpu tuning.study="$S" echo=after_batching workload.batch_size=4 \
      trainer.eval_every_fresh_examples=320
  done
  FROM=c5; STUDIES=""
fi
if [ "$FROM" = c5 ]; then
  for S in ${STUDIES:-0 1 2 3 4}; do
    step c5 "$S"
    run experiment=lm_batch_size_fine_cpu tuning.study="$S"
    run experiment=lm_batch_size_fine_cpu tuning.study="$S" echo=before_batching echo.shuffle_buffer=640 \
      workload.batch_size=16,128
  done
fi
echo "== done $(date -u +%FT%TZ)"
