"""Structured configs (the schema Hydra composes into) and their validation.

Every field carries, in its metadata, the sentence that says what values it allows. Both kinds of bad
value use that sentence: those OmegaConf rejects while composing (``echo.factor=abc``) and those
:func:`validate` rejects afterwards (``echo.factor=0``), so the user always gets one line naming the key
and what is allowed.

This module imports no TensorFlow or JAX: the command line is checked before anything heavy loads.
"""

import hashlib
import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

PLACEMENTS = ("none", "before_augmentation", "after_augmentation", "before_batching", "after_batching")


class ConfigError(ValueError):
    """A config value that is not allowed; str() is the one line shown to the user."""

    def __init__(self, key: str, value: Any, allowed: str, message: Optional[str] = None):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(message or f"{key}={_show(value)} is not allowed: {allowed}")

    @classmethod
    def unknown_key(cls, key: str, known: list[str]) -> "ConfigError":
        section, _, name = key.rpartition(".")
        where = section or "the config"
        return cls(key, None, ", ".join(known),
                   f"{key} is not a key: {where} has {', '.join(known) if known else 'no such key'}")


def _show(value: Any) -> str:
    """A value as the user would type it: 2 rather than 2.0."""
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return repr(value) if value == "" or " " in value else value
    return str(value)


def _f(default: Any = MISSING, allowed: str = "", **kw: Any) -> Any:
    if "default_factory" in kw:
        return field(default_factory=kw.pop("default_factory"), metadata={"allowed": allowed})
    return field(default=default, metadata={"allowed": allowed})


@dataclass
class EchoConfig:
    placement: str = _f("none", "one of " + ", ".join(PLACEMENTS))
    factor: float = _f(1.0, "a real number >= 1")
    shuffle_buffer: int = _f(0, "an integer >= 0 (0 = no shuffle after the echo stage)")


@dataclass
class TargetConfig:
    metric: str = _f(MISSING, "the name of an evaluation metric of the workload")
    value: float = _f(MISSING, "a real number")
    mode: str = _f("max", "one of max, min")


@dataclass
class SearchDimension:
    """One tuned metaparameter: a dotted config key and its range on a scale."""

    key: str = _f(MISSING, "a config key, e.g. optimizer.learning_rate")
    low: float = _f(MISSING, "a real number")
    high: float = _f(MISSING, "a real number")
    scale: str = _f("linear", "one of linear, log, log_one_minus, int")


@dataclass
class WorkloadConfig:
    name: str = _f(MISSING, "a workload name")
    task: str = _f(MISSING, "a registered task")
    dataset: str = _f(MISSING, "a dataset the task can read")
    train_split: str = _f("train", "a split of the dataset")
    eval_split: str = _f("test", "a split of the dataset")
    eval_examples: Optional[int] = _f(None, "null (the whole split) or an integer >= 1")
    batch_size: int = _f(128, "an integer >= 1")
    eval_batch_size: int = _f(1000, "an integer >= 1")
    shuffle_buffer: int = _f(10_000, "an integer >= 1 (the shuffle before the echo stages)")
    # The echo point that `echo=default` uses: the one the paper recommends for this kind of pipeline.
    echo_placement: str = _f("before_augmentation", "one of " + ", ".join(PLACEMENTS))
    augment: Dict[str, Any] = _f(allowed="a mapping of augmentation options", default_factory=dict)
    model: Dict[str, Any] = _f(allowed="a mapping of model options", default_factory=dict)
    # Text pipelines: seq_len, tokenizer (byte | sentencepiece), vocab_size, pack_docs, doc_shuffle_buffer.
    text: Dict[str, Any] = _f(allowed="a mapping of text options", default_factory=dict)
    # Detection: image_size, max_boxes, score_threshold, max_detections.
    detection: Dict[str, Any] = _f(allowed="a mapping of detection options", default_factory=dict)
    label_smoothing: float = _f(0.0, "a real number in [0, 1)")
    target: TargetConfig = _f(allowed="metric, value, mode", default_factory=TargetConfig)
    # What a tuning study searches over (see tuning.py).
    search_space: List[SearchDimension] = _f(allowed="a list of key, low, high, scale", default_factory=list)


@dataclass
class OptimizerConfig:
    name: str = _f("momentum", "one of momentum")
    learning_rate: float = _f(0.1, "a real number > 0")
    momentum: float = _f(0.9, "a real number in [0, 1)")
    nesterov: bool = _f(True, "true or false")
    weight_decay: float = _f(0.0, "a real number >= 0")
    schedule: str = _f("constant", "one of constant, linear_decay, piecewise_exponential")
    warmup_steps: int = _f(0, "an integer >= 0")
    # Linear decay from learning_rate to learning_rate * final_fraction over decay_steps, then flat.
    decay_steps: Optional[int] = _f(None, "null (= trainer.max_steps) or an integer >= 1")
    final_fraction: float = _f(0.0, "a real number in [0, 1]")
    # piecewise_exponential: the rate is multiplied by decay_factor at each boundary (steps after warmup).
    decay_boundaries: List[int] = _f(allowed="a list of increasing integers >= 1", default_factory=list)
    decay_factor: float = _f(0.1, "a real number in (0, 1]")


@dataclass
class TrainerConfig:
    max_steps: int = _f(10_000, "an integer >= 1")
    eval_every_fresh_examples: int = _f(10_000, "an integer >= 1")
    # Stop once this many fresh examples were read (the paper's fixed-budget comparison); null = no limit.
    max_fresh_examples: Optional[int] = _f(None, "null or an integer >= 1")
    stop_at_target: bool = _f(True, "true or false")
    progress: bool = _f(True, "true or false (a progress bar is drawn only on a terminal)")
    # Orbax checkpoints (with the input iterator's state) every this many steps and at the end; 0 = none.
    checkpoint_every_steps: int = _f(500, "an integer >= 0 (0 = no checkpoints)")
    precision: str = _f("float32", "one of float32, bfloat16 (bfloat16 compute, float32 parameters)")
    # Split each batch over every device (one mesh axis "data"); false: one device.
    data_parallel: bool = _f(True, "true or false")
    # Several processes (hosts): jax.distributed.initialize() reads SLURM, Open MPI or TPU settings.
    distributed: bool = _f(False, "true or false")
    # Batches and steps timed before training for the summary's timing facts (see profile.py); 0 = none.
    profile_batches: int = _f(20, "an integer >= 0 (0 = no timing facts)")
    # JAX's persistent compilation cache: a rerun of the same shapes skips XLA compilation.
    compilation_cache_dir: Optional[str] = _f("~/.cache/echo_experiments/jax", "null (no cache) or a directory path")


@dataclass
class TuningConfig:
    # Both null outside a study. With -m tuning=study, the sweep runs every (study, trial) pair.
    study: Optional[int] = _f(None, "null or an integer >= 0")
    trial: Optional[int] = _f(None, "null or an integer >= 0")
    studies: int = _f(2, "an integer >= 1 (independent repeats of the search)")
    trials: int = _f(8, "an integer >= 1 (trials per study)")
    seed: int = _f(0, "an integer >= 0 (seeds the quasi-random sequences)")
    sampler: str = _f("halton", "one of halton, sobol")


@dataclass
class StorageConfig:
    # Where training records are read from; see echo_experiments/data/storage.py.
    kind: str = _f("local", "one of local, http, emulated")
    latency_ms: float = _f(0.0, "a real number >= 0 (milliseconds per request)")
    bandwidth_mb_s: Optional[float] = _f(None, "null (unlimited) or a real number > 0 (MB/s per request)")
    parallel_reads: int = _f(1, "an integer >= 1 (requests in flight)")
    url: Optional[str] = _f(None, "null (start a record server on loopback) or a record server's http:// URL")


@dataclass
class DataConfig:
    # Where TFDS data sets live; null = $TFDS_DATA_DIR, else ~/tensorflow_datasets (TFDS's own default).
    dir: Optional[str] = _f(None, "null or a directory path")
    # A tf.data service dispatcher (grpc://host:port) whose workers read, decode and shuffle; echoing stays local.
    service: Optional[str] = _f(None, "null or a tf.data service address grpc://host:port")


@dataclass
class Config:
    workload: WorkloadConfig = _f(allowed="a workload", default_factory=WorkloadConfig)
    echo: EchoConfig = _f(allowed="an echo config", default_factory=EchoConfig)
    optimizer: OptimizerConfig = _f(allowed="an optimizer config", default_factory=OptimizerConfig)
    trainer: TrainerConfig = _f(allowed="a trainer config", default_factory=TrainerConfig)
    data: DataConfig = _f(allowed="a data config", default_factory=DataConfig)
    storage: StorageConfig = _f(allowed="a storage config", default_factory=StorageConfig)
    tuning: TuningConfig = _f(allowed="a tuning config", default_factory=TuningConfig)
    seed: int = _f(0, "an integer >= 0")


ConfigStore.instance().store(name="base_config", node=Config)


def short_name(name: str, limit: int = 120) -> str:
    """A directory name from a job's overrides, cut to a length every file system takes (with a hash)."""
    if len(name) <= limit:
        return name
    return f"{name[:limit - 13]}-{hashlib.sha1(name.encode()).hexdigest()[:12]}"


OmegaConf.register_new_resolver("short_name", short_name, replace=True)
# Integer arithmetic for presets whose budgets depend on the echo factor: ${max:4000,${mul:2000,${echo.factor}}}
OmegaConf.register_new_resolver("mul", lambda a, b: int(round(float(a) * float(b))), replace=True)
OmegaConf.register_new_resolver("max", lambda a, b: max(a, b), replace=True)


def _lookup(key: str) -> tuple[Any, str]:
    """The schema node (a dataclass or a type) for a dotted key and its allowed-values sentence."""
    node: Any = Config
    allowed = ""
    for part in [p for p in key.split(".") if p]:
        match = [f for f in fields(node) if f.name == part] if is_dataclass(node) else []
        if not match:
            return None, ""
        node, allowed = match[0].type, match[0].metadata.get("allowed", "")
    return node, allowed


def allowed_for(key: str) -> str:
    """The sentence of allowed values for a dotted key, e.g. ``echo.factor``; "" if unknown."""
    return _lookup(key)[1]


def keys_of(key: str) -> list[str]:
    """The field names under a dotted section key ("" for the root); [] if it is not a section."""
    node = _lookup(key)[0]
    return [f.name for f in fields(node)] if is_dataclass(node) else []


def _check(ok: bool, key: str, value: Any) -> None:
    if not ok:
        raise ConfigError(key, value, allowed_for(key))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def validate(cfg: DictConfig, placements: tuple[str, ...] = PLACEMENTS) -> None:
    """Raise ConfigError for the first value that is not allowed.

    ``placements`` are the echo points the chosen workload's pipeline has.
    """
    e, w, o, t = cfg.echo, cfg.workload, cfg.optimizer, cfg.trainer
    _check(_is_real(e.factor) and e.factor >= 1, "echo.factor", e.factor)
    _check(e.placement in PLACEMENTS, "echo.placement", e.placement)
    if e.placement not in placements:
        raise ConfigError(
            "echo.placement", e.placement,
            f"workload {w.name} has no such stage; one of {', '.join(placements)}")
    if e.placement == "none" and e.factor != 1:
        raise ConfigError(
            "echo.placement", e.placement,
            f"echo.factor={_show(e.factor)} needs an echo point: one of {', '.join(p for p in placements if p != 'none')}")
    _check(_is_int(e.shuffle_buffer) and e.shuffle_buffer >= 0, "echo.shuffle_buffer", e.shuffle_buffer)
    _check(_is_int(cfg.seed) and cfg.seed >= 0, "seed", cfg.seed)

    _check(_is_int(w.batch_size) and w.batch_size >= 1, "workload.batch_size", w.batch_size)
    _check(_is_int(w.eval_batch_size) and w.eval_batch_size >= 1, "workload.eval_batch_size", w.eval_batch_size)
    _check(w.eval_examples is None or (_is_int(w.eval_examples) and w.eval_examples >= 1),
           "workload.eval_examples", w.eval_examples)
    _check(_is_int(w.shuffle_buffer) and w.shuffle_buffer >= 1, "workload.shuffle_buffer", w.shuffle_buffer)
    _check(_is_real(w.label_smoothing) and 0 <= w.label_smoothing < 1, "workload.label_smoothing", w.label_smoothing)
    _check(w.target.mode in ("max", "min"), "workload.target.mode", w.target.mode)

    _check(o.name in ("momentum",), "optimizer.name", o.name)
    _check(_is_real(o.learning_rate) and o.learning_rate > 0, "optimizer.learning_rate", o.learning_rate)
    _check(_is_real(o.momentum) and 0 <= o.momentum < 1, "optimizer.momentum", o.momentum)
    _check(_is_real(o.weight_decay) and o.weight_decay >= 0, "optimizer.weight_decay", o.weight_decay)
    _check(o.schedule in ("constant", "linear_decay", "piecewise_exponential"), "optimizer.schedule", o.schedule)
    bounds = list(o.decay_boundaries)
    _check(all(_is_int(b) and b >= 1 for b in bounds) and bounds == sorted(set(bounds)),
           "optimizer.decay_boundaries", bounds)
    _check(_is_real(o.decay_factor) and 0 < o.decay_factor <= 1, "optimizer.decay_factor", o.decay_factor)
    _check(_is_int(o.warmup_steps) and o.warmup_steps >= 0, "optimizer.warmup_steps", o.warmup_steps)
    _check(o.decay_steps is None or (_is_int(o.decay_steps) and o.decay_steps >= 1),
           "optimizer.decay_steps", o.decay_steps)
    _check(_is_real(o.final_fraction) and 0 <= o.final_fraction <= 1, "optimizer.final_fraction", o.final_fraction)

    st = cfg.storage
    _check(st.kind in ("local", "http", "emulated"), "storage.kind", st.kind)
    _check(_is_real(st.latency_ms) and st.latency_ms >= 0, "storage.latency_ms", st.latency_ms)
    _check(st.bandwidth_mb_s is None or (_is_real(st.bandwidth_mb_s) and st.bandwidth_mb_s > 0),
           "storage.bandwidth_mb_s", st.bandwidth_mb_s)
    _check(_is_int(st.parallel_reads) and st.parallel_reads >= 1, "storage.parallel_reads", st.parallel_reads)
    if st.url is not None and (st.kind != "http" or not str(st.url).startswith("http://")):
        raise ConfigError("storage.url", st.url, "null, or with storage.kind=http a record server's http:// URL")

    tu = cfg.tuning
    for key in ("study", "trial"):
        value = tu[key]
        _check(value is None or (_is_int(value) and value >= 0), f"tuning.{key}", value)
    _check(_is_int(tu.studies) and tu.studies >= 1, "tuning.studies", tu.studies)
    _check(_is_int(tu.trials) and tu.trials >= 1, "tuning.trials", tu.trials)
    _check(_is_int(tu.seed) and tu.seed >= 0, "tuning.seed", tu.seed)
    _check(tu.sampler in ("halton", "sobol"), "tuning.sampler", tu.sampler)

    _check(_is_int(t.max_steps) and t.max_steps >= 1, "trainer.max_steps", t.max_steps)
    _check(_is_int(t.profile_batches) and t.profile_batches >= 0, "trainer.profile_batches", t.profile_batches)
    _check(_is_int(t.checkpoint_every_steps) and t.checkpoint_every_steps >= 0, "trainer.checkpoint_every_steps",
           t.checkpoint_every_steps)
    _check(t.precision in ("float32", "bfloat16"), "trainer.precision", t.precision)
    service = cfg.data.service
    _check(service is None or (isinstance(service, str) and service.startswith("grpc://")), "data.service", service)
    if service is not None and cfg.storage.kind != "local":
        raise ConfigError("storage.kind", cfg.storage.kind, "local with data.service (the service reads the data)")
    if service is not None and t.checkpoint_every_steps:
        raise ConfigError("trainer.checkpoint_every_steps", t.checkpoint_every_steps,
                          "0 with data.service (the service's workers hold the input's state, which no checkpoint can save)")
    _check(t.max_fresh_examples is None or (_is_int(t.max_fresh_examples) and t.max_fresh_examples >= 1),
           "trainer.max_fresh_examples", t.max_fresh_examples)
    _check(_is_int(t.eval_every_fresh_examples) and t.eval_every_fresh_examples >= 1,
           "trainer.eval_every_fresh_examples", t.eval_every_fresh_examples)


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)
