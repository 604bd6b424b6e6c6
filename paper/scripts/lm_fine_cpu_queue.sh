#!/usr/bin/env bash
# The language model's remaining runs for C3, A6 and A5, in their order, each step resumable: the same command
# again goes on where it stopped (a sweep finishes what is missing, retime times what is not yet timed). The
# commands and their hours are the presets' headers (conf/experiment/lm_fine_cpu.yaml, autopilot_window_cpu.yaml);
# the stores are the ones profiled before any timed run (their NOTES.md). From a checkout of main:
#   paper/scripts/lm_fine_cpu_queue.sh TUNED          # TUNED: the folder Hydra wrote the tuning sweep into,
#                                               # multirun/lm_fine_cpu/transformer_pydocs of its checkout
# 1. A6, two jobs at a time (fresh examples are compared, not seconds), into multirun/autopilot_window_cpu/.
# 2. C3: each study's best trial of the baseline and of example echoing at e = 2-5, timed alone on the slow store.
# 3. The timing band: each study's baseline timed a second time, alone.
# 4. A5: the autopilot's trials, one at a time, alone, into multirun/lm_fine_cpu/ (archived beside the tuned runs).
# Steps 2-4 time runs: nothing else may run on the machine meanwhile. Every study of one step on one CPU model.
# Archive each step's runs as they finish (make archive SWEEP=...; TUNED: python -m paper.archive
# archive TUNED --results results).
set -euo pipefail
TUNED=${1:?usage: paper/scripts/lm_fine_cpu_queue.sh TUNED (the tuning sweep folder multirun/lm_fine_cpu/transformer_pydocs)}
PY=${PY:-.venv/bin/python}
FROM=${FROM:-1}  # the step to begin with
tuned=$(find "$TUNED" -mindepth 2 -maxdepth 2 -name summary.json -not -path "*/timed/*" | wc -l)
if [ "$tuned" -lt 180 ]; then  # C3 and the band time each study's best trial: every study complete first
  echo "error: $TUNED holds $tuned of lm_fine_cpu's 180 finished trials: finish its 5 studies first" >&2
  exit 2
fi
STORE="storage=emulated storage.latency_ms=90 storage.parallel_reads=4 storage.read_unit=example"
retime() {
  $PY -m paper.retime "$TUNED" $(printf -- '--store %s ' $STORE) --exclude echo=after_batching \
    --exclude echo.factor=8 "$@"
}
step() { echo "== step $1 $(date -u +%FT%TZ)"; }
if [ "$FROM" -le 1 ]; then
  step 1
  for S in 0 1 2; do
    $PY -m echo_experiments -m experiment=autopilot_window_cpu tuning.study=$S hydra/launcher=joblib \
      hydra.launcher.n_jobs=2
  done
fi
if [ "$FROM" -le 2 ]; then step 2; retime; fi
if [ "$FROM" -le 3 ]; then
  step 3
  retime --again $(printf -- '--exclude echo.factor=%s ' 2 3 4 5)
fi
if [ "$FROM" -le 4 ]; then
  step 4
  for S in 0 1 2 3 4; do
    # shellcheck disable=SC2086
    $PY -m echo_experiments -m experiment=lm_fine_cpu tuning.study=$S echo.factor=auto echo.max_factor=8 $STORE
  done
fi
step done
