"""The shared config schema (the keys every run has: echo, optimizer, trainer, data, storage, tuning) and the
helpers every schema is written with.

Every field states, in one place, the sentence that says what values it allows and the check that enforces
it (``setting(default, allowed, check)``, schema.py). Both kinds of bad value use that sentence: those
OmegaConf rejects while composing (``echo.factor=abc``, a misspelt key of a typed section) and those
validation rejects afterwards (``echo.factor=0``), so the user always gets one line naming the key and what
is allowed. The few rules that relate two of these keys are written once, in rules.py.

A workload's section is typed by its task: each task's schema sits beside its workload
(workloads/<task>_schema.py) and workloads/registry.py stores them in the group ``workload_schema``, so a
wrong key or type under ``workload.model``, ``workload.augment``, ``workload.text`` or ``workload.detection``
fails while composing; the rules that relate the workload to the rest are the registry's.

This module imports no TensorFlow or JAX: the command line is checked before anything heavy loads.
"""

import hashlib
import os
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, ClassVar, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from echo_experiments.core.placement import AUTO, CAP_RULES, PLACEMENTS
from echo_experiments.core.schema import (
    argument,
    boolean,
    field_at,
    folder_name,
    has_port,
    increasing,
    integer,
    one_of,
    optional,
    real,
    setting,
    text,
)

# Seeds feed JAX's PRNGKey and tf.data's int64 seeds: non-negative and within 32 bits everywhere.
MAX_SEED = 2**31 - 1
# Bounds that keep every accepted value one a run can finish with: tf.data allocates shuffle buffers as they
# fill (a buffer near 2^63 crashes it), and an echo factor past these copies nothing a paper study needs.
MAX_FACTOR = 1000
MAX_BUFFER = 10_000_000
# Step counts and positions are int32 on the device; each profiled batch is timed before training (beyond this
# the profile alone would take hours); each read in flight is a thread.
INT32_MAX = 2**31 - 1
MAX_PROFILE_BATCHES = 1000
MAX_PARALLEL_READS = 1024
MAX_BATCH = 65_536


# --- the schema -----------------------------------------------------------------------------------------

@dataclass
class EchoConfig:
    placement: str = setting("none", "one of " + ", ".join(PLACEMENTS), one_of(*PLACEMENTS))
    # auto: the autopilot (autopilot.py) trains on copies of recent data whenever the accelerator would wait for
    # the input.
    factor: Any = setting(1.0, f"a real number >= 1 and <= {MAX_FACTOR}, or auto",
                          lambda v: v == AUTO or real(1, MAX_FACTOR)(v))
    # With factor auto: nothing trained more than this many times (its copies included).
    max_factor: float = setting(4.0, f"a real number >= 1 and <= {MAX_FACTOR} (the cap of echo.factor=auto)",
                                real(1, MAX_FACTOR))
    # With factor auto: fixed, the cap is max_factor; trend or paired, the autopilot moves its cap between 1 and
    # max_factor by the loss of a slice of fresh batches it holds out, window by window (autopilot/cap.py).
    cap: str = setting("fixed", "one of fixed, trend, paired (with echo.factor=auto: the cap is echo.max_factor, or "
                       "moves within it by held-out progress)", one_of(*CAP_RULES))
    # With factor auto: copies only while the copy-worth estimate (training/worth.py) says one is worth this much.
    # Kept so that every committed run's config.yaml still reads; nothing reads it while no estimate is chosen.
    min_worth: float = setting(0.0, "0 while no copy-worth estimate is chosen", real(0, 1))
    # With factor auto: a run whose recorded decisions this one makes again instead of the clock's (decisions.py).
    replay: Optional[str] = setting(None, "null or the directory of a run made with echo.factor=auto (the "
                                    "decisions it recorded are made again, whatever the input's speed)",
                                    optional(text))
    # null: a shuffle of ten batches of copies after example echoing, none after batch echoing (data/stream.py).
    shuffle_buffer: Optional[int] = setting(None, "null (the default: 10 x ceil(e) x batch examples after example "
                                             "echoing, none after batch echoing) or an integer >= 0 "
                                             f"(0 = no shuffle after the echo stage), at most {MAX_BUFFER}",
                                            optional(integer(0, MAX_BUFFER)))


@dataclass
class TargetConfig:
    metric: str = setting(MISSING, "the name of an evaluation metric of the workload", text)
    value: float = setting(MISSING, "a real number", real())
    mode: str = setting("max", "one of max, min", one_of("max", "min"))


SCALES = ("linear", "log", "log_one_minus", "int")


@dataclass
class SearchDimension:
    """One tuned metaparameter: a dotted config key and its range on a scale (see tuning.py)."""

    key: str = setting(MISSING, "a config key, e.g. optimizer.learning_rate", text)
    low: float = setting(MISSING, "a real number", real())
    high: float = setting(MISSING, "a real number", real())
    scale: str = setting("linear", "one of " + ", ".join(SCALES), one_of(*SCALES))


@dataclass
class WorkloadConfig:
    """What every workload has; a task's schema (below) adds its model and data options, and declares what
    the task evaluates, the data sets it knows (empty: any), and whether its pipeline augments (and so has
    echo points before and after augmentation)."""

    metrics: ClassVar[tuple[str, ...]] = ()
    datasets: ClassVar[tuple[str, ...]] = ()
    augments: ClassVar[bool] = False

    name: str = setting(MISSING, "a workload name: letters, digits, '_', '-' and '.' (it names a folder under runs/)",
                        folder_name)
    task: str = setting(MISSING, "a registered task or module:Class of your own", text)
    dataset: str = setting(MISSING, "a dataset the task can read", text)
    train_split: str = setting("train", "a split of the dataset", text)
    eval_split: str = setting("test", "a split of the dataset", text)
    eval_examples: Optional[int] = setting(None, "null (the whole split) or an integer >= 1", optional(integer(1)))
    batch_size: int = setting(128, f"an integer >= 1 and <= {MAX_BATCH}", integer(1, MAX_BATCH))
    eval_batch_size: int = setting(1000, f"an integer >= 1 and <= {MAX_BATCH}", integer(1, MAX_BATCH))
    shuffle_buffer: int = setting(10_000, f"an integer >= 1 (the shuffle before the echo stages), at most {MAX_BUFFER}",
                                  integer(1, MAX_BUFFER))
    # The echo point that `echo=default` uses: the one the paper recommends for this kind of pipeline.
    echo_placement: str = setting("before_augmentation", "one of " + ", ".join(PLACEMENTS), one_of(*PLACEMENTS))
    target: TargetConfig = setting(allowed="metric, value, mode", default_factory=TargetConfig)
    # What a tuning study searches over (see tuning.py).
    search_space: List[SearchDimension] = setting(allowed="a list of key, low, high, scale", default_factory=list)


SCHEDULES = ("constant", "linear_decay", "piecewise_exponential")


@dataclass
class CustomWorkloadConfig(WorkloadConfig):
    """The schema of a user's own workload (``task: module:Class``; its YAML starts from
    ``/workload_schema@workload: custom``): the keys every workload has, and ``options`` for the class to read.
    The class's ``config_class`` is a subclass of this one that declares ``metrics`` (and ``augments``,
    ``datasets``) as ClassVars, the way the built-in schemas above do."""

    options: Dict[str, Any] = setting(allowed="a mapping of the workload's own options", default_factory=dict)


@dataclass
class OptimizerConfig:
    name: str = setting("momentum", "one of momentum", one_of("momentum"))
    learning_rate: float = setting(0.1, "a real number > 0", real(0, low_open=True))
    momentum: float = setting(0.9, "a real number in [0, 1)", real(0, 1, high_open=True))
    nesterov: bool = setting(True, "true or false", boolean)
    weight_decay: float = setting(0.0, "a real number >= 0", real(0))
    schedule: str = setting("constant", "one of " + ", ".join(SCHEDULES), one_of(*SCHEDULES))
    final_fraction: float = setting(0.0, "a real number in [0, 1] (linear_decay ends at learning_rate x this)",
                                    real(0, 1))
    decay_factor: float = setting(0.1, "a real number in (0, 1] (piecewise_exponential: the rate is multiplied by it "
                                  "at each boundary)", real(0, 1, low_open=True))
    # The schedule in fresh examples (see optim.py): every echo factor gets the same rate per fresh example.
    warmup_fresh_examples: int = setting(0, f"an integer from 0 to {INT32_MAX} (fresh examples of linear warmup)",
                                         integer(0, INT32_MAX))
    decay_fresh_examples: Optional[int] = setting(None, "null (= trainer.max_fresh_examples) or an integer from 1 to "
                                                   f"{INT32_MAX} (fresh examples of linear decay, after the warmup)",
                                             optional(integer(1, INT32_MAX)))
    decay_boundaries_fresh_examples: List[int] = setting(allowed=f"a list of increasing integers from 1 to {INT32_MAX} "
                                                            "(fresh examples after the warmup)",
                                                    check=increasing(integer(1, INT32_MAX)),
                                                    default_factory=list)
    # The same in steps, only for a user who asks for steps: any of them set puts the whole schedule in steps.
    warmup_steps: Optional[int] = setting(None, f"null or an integer from 0 to {INT32_MAX}",
                                          optional(integer(0, INT32_MAX)))
    decay_steps: Optional[int] = setting(None, f"null (= trainer.max_steps) or an integer from 1 to {INT32_MAX}",
                                         optional(integer(1, INT32_MAX)))
    decay_boundaries_steps: List[int] = setting(allowed=f"a list of increasing integers from 1 to {INT32_MAX} (steps "
                                                        "after the warmup)",
                                           check=increasing(integer(1, INT32_MAX)), default_factory=list)


@dataclass
class TrainerConfig:
    # The budget, in fresh examples like everything a condition could be favoured by (docs/protocol.md).
    max_fresh_examples: Optional[int] = setting(1_000_000, f"null or an integer from 1 to {INT32_MAX} (stop once "
                                                      "this many fresh examples were read)",
                                                optional(integer(1, INT32_MAX)))
    eval_every_fresh_examples: int = setting(10_000, f"an integer from 1 to {INT32_MAX}", integer(1, INT32_MAX))
    # A cap in steps, for a user who asks for one; null = none.
    max_steps: Optional[int] = setting(None, f"null or an integer from 1 to {INT32_MAX} (stop after this many steps)",
                                       optional(integer(1, INT32_MAX)))
    stop_at_target: bool = setting(True, "true or false", boolean)
    # Start the run directory over (its summary, metrics, event files and checkpoints are deleted first); by
    # default a rerun resumes an interrupted or failed run and leaves a complete one alone.
    restart: bool = setting(False, "true or false (true: delete the run directory's earlier attempt and start over)",
                       boolean)
    progress: bool = setting(True, "true or false (a progress bar is drawn only on a terminal)", boolean)
    # TensorBoard event files in <run dir>/tb (events.py): curves on steps and on fresh examples, HParams.
    tensorboard: bool = setting(True, "true or false (TensorBoard event files in <run dir>/tb)", boolean)
    # Orbax checkpoints (with the input iterator's state) at the first step after this many seconds of training
    # since the last one, every checkpoint_every_steps steps, and when a signal stops it. A checkpoint of the
    # default run costs about 1.5 s (the shuffle buffer's contents), so a time cadence bounds the cost at any
    # step rate.
    checkpoint_every_seconds: float = setting(600.0, "a real number >= 0 (0 = not by time)", real(0))
    checkpoint_every_steps: int = setting(0, "an integer >= 0 (0 = not by step count)", integer(0))
    precision: str = setting("float32", "one of float32, bfloat16 (bfloat16 compute, float32 parameters)",
                        one_of("float32", "bfloat16"))
    # Split each batch over every device (one mesh axis "data"); false: one device.
    data_parallel: bool = setting(True, "true or false", boolean)
    # Several processes (hosts): jax.distributed.initialize() reads SLURM, Open MPI or TPU settings, or the
    # three keys below (every process gets the same coordinator and count, each its own id).
    distributed: bool = setting(False, "true or false", boolean)
    coordinator_address: Optional[str] = setting(None, "null (found from SLURM, Open MPI or the TPU slice) or "
                                                       "host:port of process 0", optional(text))
    # Where process 0's coordinator listens; null: loopback for a coordinator_address on this machine, else every
    # interface (JAX's default, which other machines need). It takes no authentication either way.
    coordinator_bind_address: Optional[str] = setting(None, "null (loopback for a local coordinator_address, else "
                                                            "every interface) or host:port to listen on",
                                                      optional(text))
    num_processes: Optional[int] = setting(None, "null or an integer >= 1", optional(integer(1)))
    process_id: Optional[int] = setting(None, "null or an integer >= 0", optional(integer(0)))
    # How long a process waits for its peers to join, and for a lost peer's heartbeat before it gives up.
    distributed_timeout_s: int = setting(300, "an integer >= 1 (seconds)", integer(1))
    # Batches and steps timed before training for the summary's timing facts (see timing.py); 0 = none.
    profile_batches: int = setting(20, f"an integer from 0 to {MAX_PROFILE_BATCHES} (0 = no timing facts)",
                                   integer(0, MAX_PROFILE_BATCHES))
    # The copy-worth estimate (training/worth.py): a held-out gradient every this many steps, each step's gradient
    # set against it; 0 = none, and the step computes nothing beside training.
    copy_worth_every: int = setting(0, "an integer >= 0 (0 = no copy-worth estimate)", integer(0))
    # JAX's persistent compilation cache: a rerun of the same shapes skips XLA compilation.
    compilation_cache_dir: Optional[str] = setting("~/.cache/echo_experiments/jax",
                                                   "null (no cache) or a directory path", optional(text))


SAMPLERS = ("halton", "sobol")


@dataclass
class TuningConfig:
    # Both null outside a study. With -m tuning=study, the sweep runs every (study, trial) pair.
    study: Optional[int] = setting(None, "null or an integer >= 0", optional(integer(0)))
    trial: Optional[int] = setting(None, "null or an integer >= 0", optional(integer(0)))
    studies: int = setting(2, "an integer >= 1 (independent repeats of the search)", integer(1))
    trials: int = setting(8, "an integer >= 1 (trials per study)", integer(1))
    seed: int = setting(0, "an integer >= 0 (seeds the quasi-random sequences)", integer(0, MAX_SEED))
    sampler: str = setting("halton", "one of " + ", ".join(SAMPLERS), one_of(*SAMPLERS))
    # A trial whose fresh examples pass the best fresh examples to target of its study's finished trials can
    # no longer be the study's best: it stops, recorded as pruned (never as reached).
    prune: bool = setting(True, "true or false", boolean)
    # 1: stop at the study's best; 1.5: only past 1.5 x it, so a paired comparison learns more from the trial.
    prune_margin: float = setting(1.0, "a real number >= 1 (a trial is pruned once its fresh examples reach this times "
                                  "its study's best)", real(1))


STORAGE_KINDS = ("local", "http", "emulated")
READ_UNITS = ("record", "example")


@dataclass
class StorageConfig:
    # Where training records are read from; see echo_experiments/data/storage.py.
    kind: str = setting("local", "one of " + ", ".join(STORAGE_KINDS), one_of(*STORAGE_KINDS))
    latency_ms: float = setting(0.0, "a real number >= 0 (milliseconds per request)", real(0))
    bandwidth_mb_s: Optional[float] = setting(None, "null (unlimited) or a real number > 0 (MB/s per request)",
                                         optional(real(0, low_open=True)))
    parallel_reads: int = setting(1, f"an integer from 1 to {MAX_PARALLEL_READS} (requests in flight, a thread each)",
                                  integer(1, MAX_PARALLEL_READS))
    # Input whose speed changes (emulated only): spans of [reads, latency_ms] in turn, repeated, in place of
    # latency_ms, e.g. [[20000, 10], [20000, 1]]; counted from the start of the process.
    latency_schedule: Optional[List[Any]] = setting(
        None, "null or a list of [reads, latency_ms] pairs (reads an integer >= 1, latency_ms a real number >= 0)",
        optional(lambda v: len(v) > 0 and all(len(p) == 2 and integer(1)(p[0]) and real(0)(p[1]) for p in v)))
    # What one read fetches: a record as the data set stores it (a document, for the language model), or one of
    # the examples the workload makes of the records (a packed sequence: a store of pre-packed sequences).
    read_unit: str = setting("record", "one of record, example (example: emulated only)", one_of(*READ_UNITS))
    url: Optional[str] = setting(None, "null, or with storage.kind=http a record server's http:// URL",
                            optional(lambda v: isinstance(v, str) and v.startswith("http://")))


@dataclass
class DataConfig:
    # Where TFDS data sets live; null = $TFDS_DATA_DIR, else ~/tensorflow_datasets (TFDS's own default).
    # A given folder must exist: a mistyped path is refused rather than created and filled.
    dir: Optional[str] = setting(None, "null ($TFDS_DATA_DIR, else ~/tensorflow_datasets) or an existing folder",
                            optional(lambda v: text(v) and os.path.isdir(os.path.expanduser(os.path.expandvars(v)))))
    # A tf.data service dispatcher (grpc://host:port) whose workers read, decode and shuffle; echoing stays local.
    service: Optional[str] = setting(None, "null or a tf.data service address grpc://host:port (port 1-65535)",
                                optional(lambda v: isinstance(v, str) and v.startswith("grpc://") and has_port(v)))
    # The longest any wait on something outside the process may take: reaching the tf.data service
    # dispatcher or the record server, and the next batch from the input pipeline (its workers, the server,
    # the storage). Past it the run ends with one line naming what it waited for; its checkpoints stay.
    timeout_s: float = setting(300.0, "a real number > 0 (seconds)", real(0, low_open=True))


@dataclass
class Config:
    workload: WorkloadConfig = setting(allowed="a workload", default_factory=WorkloadConfig)
    echo: EchoConfig = setting(allowed="an echo config", default_factory=EchoConfig)
    optimizer: OptimizerConfig = setting(allowed="an optimizer config", default_factory=OptimizerConfig)
    trainer: TrainerConfig = setting(allowed="a trainer config", default_factory=TrainerConfig)
    data: DataConfig = setting(allowed="a data config", default_factory=DataConfig)
    storage: StorageConfig = setting(allowed="a storage config", default_factory=StorageConfig)
    tuning: TuningConfig = setting(allowed="a tuning config", default_factory=TuningConfig)
    seed: int = setting(0, f"an integer in [0, {MAX_SEED}]", integer(0, MAX_SEED))


ConfigStore.instance().store(name="base_config", node=Config)


def short_name(name: str, limit: int = 120) -> str:
    """A directory name from a job's overrides, cut to ``limit`` bytes of UTF-8 (with a hash), which every file
    system takes whatever characters a value holds (60 emoji are 240 bytes); a path in a value
    (workload.dataset=npz:/data/x) is one name, its slashes written as underscores. Two values that differ only there
    name one folder, where the second run is refused as another config (rundir.py), never mixed."""
    safe = name.replace("/", "_")
    if len(safe.encode()) <= limit:
        return safe
    kept = safe.encode()[:limit - 13].decode("utf-8", errors="ignore")  # never half a character
    return f"{kept}-{hashlib.sha1(name.encode()).hexdigest()[:12]}"


def run_name(overrides: str) -> str:
    """A single run's directory name: its overrides (hydra.job.override_dirname, sorted, the keys that say how to
    run rather than what left out), so that the same command line names the same run and a rerun resumes it;
    ``default`` for none."""
    return short_name(overrides) if overrides else "default"


OmegaConf.register_new_resolver("short_name", short_name, replace=True)
OmegaConf.register_new_resolver("run_name", run_name, replace=True)
# Integer arithmetic for presets whose budgets depend on the echo factor: ${max:4000,${mul:2000,${echo.factor}}}
OmegaConf.register_new_resolver("mul", lambda a, b: int(round(float(a) * float(b))), replace=True)
OmegaConf.register_new_resolver("max", lambda a, b: max(a, b), replace=True)


def schema_field(key: str, workload_schemas: tuple[type, ...] = ()):
    """The dataclass field of a dotted key, looked up in the schema (``workload.*`` keys also in each of
    ``workload_schemas``: workloads/registry.py passes every task's)."""
    parts = [p for p in key.split(".") if p]
    candidates = [(Config, parts)]
    if parts[:1] == ["workload"] and len(parts) > 1:
        candidates += [(schema, parts[1:]) for schema in (*workload_schemas, CustomWorkloadConfig)]
    for root, path in candidates:
        found = field_at(root, path)
        if found is not None:
            return found
    return None


def allowed_for(key: str, workload_schemas: tuple[type, ...] = ()) -> str:
    """The sentence of allowed values for a dotted key, e.g. ``echo.factor``; "" if unknown."""
    found = schema_field(key, workload_schemas)
    return found.metadata.get("allowed", "") if found is not None else ""


def keys_of(key: str, workload_schemas: tuple[type, ...] = ()) -> list[str]:
    """The field names under a dotted section key ("" for the root); [] if it is not a typed section."""
    if not key:
        return [f.name for f in fields(Config)]
    found = schema_field(key, workload_schemas)
    return [f.name for f in fields(found.type)] if found is not None and is_dataclass(found.type) else []


def echo_arguments(factor: Any, seed: Any) -> None:
    """An echo stage's factor and seed, as a library function is given them, checked with the command line's
    bounds (ConfigError naming the argument): the tf.data and Grain stages take them."""
    argument("factor", factor, f"a real number >= 1 and <= {MAX_FACTOR}", real(1, MAX_FACTOR))
    argument("seed", seed, f"an integer in [0, {MAX_SEED}]", integer(0, MAX_SEED))
