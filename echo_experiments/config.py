"""Structured configs (the schema Hydra composes into) and their validation.

Every field states, in one place, the sentence that says what values it allows and the check that enforces
it (``_f(default, allowed, check)``). Both kinds of bad value use that sentence: those OmegaConf rejects
while composing (``echo.factor=abc``, a misspelt key of a typed section) and those :func:`validate` rejects
afterwards (``echo.factor=0``), so the user always gets one line naming the key and what is allowed. The
few rules that relate two keys are written once, at the end of :func:`validate`.

A workload's section is typed by its task: ``conf/workload/*.yaml`` start from one of the schemas stored
in the group ``workload_schema`` (image_classification, language_model, detection), so a wrong key or type
under ``workload.model``, ``workload.augment``, ``workload.text`` or ``workload.detection`` fails while composing.

This module imports no TensorFlow or JAX: the command line is checked before anything heavy loads.
"""

import enum
import hashlib
import importlib
import os
import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, ClassVar, Dict, Iterator, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf


class Placement(enum.Enum):
    """Where the echo stage goes (data/stream.py draws the pipeline): one name per point of the paper."""

    NONE = "none"
    BEFORE_AUGMENTATION = "before_augmentation"
    AFTER_AUGMENTATION = "after_augmentation"
    BEFORE_BATCHING = "before_batching"  # the same point as after_augmentation; the name for pipelines without one
    AFTER_BATCHING = "after_batching"

    @property
    def point(self) -> Optional[str]:
        """E1 (before augmentation), E2 (after augmentation = before batching), E3 (after batching)."""
        return {"before_augmentation": "E1", "after_augmentation": "E2", "before_batching": "E2",
                "after_batching": "E3"}.get(self.value)

    @property
    def echoes_batches(self) -> bool:
        return self is Placement.AFTER_BATCHING

    @classmethod
    def of(cls, echo: Any) -> "Placement":
        """The echo stage an echo config (placement, factor) builds: none at factor 1, whatever its placement
        (no echo stage, so no echo shuffle either)."""
        return cls(echo.placement) if float(echo.factor) != 1 else cls.NONE

    @classmethod
    def for_pipeline(cls, augments: bool) -> tuple["Placement", ...]:
        """The placements a pipeline has: without augmentation there is no before/after augmentation."""
        if augments:
            return tuple(cls)
        return (cls.NONE, cls.BEFORE_BATCHING, cls.AFTER_BATCHING)


PLACEMENTS = tuple(p.value for p in Placement)
# Seeds feed JAX's PRNGKey and tf.data's int64 seeds: non-negative and within 32 bits everywhere.
MAX_SEED = 2**31 - 1
# Bounds that keep every accepted value one a run can finish with: tf.data allocates shuffle buffers as they
# fill (a buffer near 2^63 crashes it), and an echo factor past these copies nothing a paper study needs.
MAX_FACTOR = 1000
MAX_BUFFER = 10_000_000
MAX_BATCH = 65_536


class ConfigError(ValueError):
    """A config value that is not allowed; str() is the one line shown to the user."""

    def __init__(self, key: str, value: Any, allowed: str, message: Optional[str] = None):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(message or f"{key}={show(value)} is not allowed: {allowed}")

    @classmethod
    def unknown_key(cls, key: str, known: list[str]) -> "ConfigError":
        section, _, name = key.rpartition(".")
        where = section or "the config"
        return cls(key, None, ", ".join(known),
                   f"{key} is not a key: {where} has {', '.join(known) if known else 'no such key'}")


def show(value: Any) -> str:
    """A value as the user would type it: 2 rather than 2.0, lists without quotes."""
    if isinstance(value, (ListConfig, DictConfig)):
        value = OmegaConf.to_container(value)
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return repr(value) if value == "" or " " in value else value
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


# --- checks: each returns whether a value is allowed --------------------------------------------------

Check = Callable[[Any], bool]


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def integer(low: int, high: Optional[int] = None) -> Check:
    return lambda v: is_int(v) and v >= low and (high is None or v <= high)


def real(low: float = -math.inf, high: float = math.inf, low_open: bool = False, high_open: bool = False) -> Check:
    def check(v: Any) -> bool:
        return (is_real(v) and (v > low if low_open else v >= low) and (v < high if high_open else v <= high))
    return check


def one_of(*values: str) -> Check:
    return lambda v: v in values


def optional(check: Check) -> Check:
    return lambda v: v is None or check(v)


def boolean(v: Any) -> bool:
    return isinstance(v, bool)


def text(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def increasing(check: Check) -> Check:
    """A list of allowed values, strictly increasing."""
    def ok(v: Any) -> bool:
        values = list(v) if isinstance(v, (list, tuple, ListConfig)) else None
        return values is not None and all(check(x) for x in values) and values == sorted(set(values))
    return ok


def nonempty_list(check: Check) -> Check:
    def ok(v: Any) -> bool:
        values = list(v) if isinstance(v, (list, tuple, ListConfig)) else None
        return bool(values) and all(check(x) for x in values)
    return ok


def _f(default: Any = MISSING, allowed: str = "", check: Optional[Check] = None, **kw: Any) -> Any:
    """A field with its allowed-values sentence and the check that enforces it."""
    meta = {"allowed": allowed, "check": check}
    if "default_factory" in kw:
        return field(default_factory=kw.pop("default_factory"), metadata=meta)
    return field(default=default, metadata=meta)


# --- the schema -----------------------------------------------------------------------------------------

@dataclass
class EchoConfig:
    placement: str = _f("none", "one of " + ", ".join(PLACEMENTS), one_of(*PLACEMENTS))
    factor: float = _f(1.0, f"a real number >= 1 and <= {MAX_FACTOR}", real(1, MAX_FACTOR))
    # null: a shuffle of ten batches of copies after example echoing, none after batch echoing (data/stream.py).
    shuffle_buffer: Optional[int] = _f(None, "null (the default: 10 x ceil(e) x batch examples after example "
                                             "echoing, none after batch echoing) or an integer >= 0 "
                                             f"(0 = no shuffle after the echo stage), at most {MAX_BUFFER}",
                                       optional(integer(0, MAX_BUFFER)))


@dataclass
class TargetConfig:
    metric: str = _f(MISSING, "the name of an evaluation metric of the workload", text)
    value: float = _f(MISSING, "a real number", real())
    mode: str = _f("max", "one of max, min", one_of("max", "min"))


SCALES = ("linear", "log", "log_one_minus", "int")


@dataclass
class SearchDimension:
    """One tuned metaparameter: a dotted config key and its range on a scale (see tuning.py)."""

    key: str = _f(MISSING, "a config key, e.g. optimizer.learning_rate", text)
    low: float = _f(MISSING, "a real number", real())
    high: float = _f(MISSING, "a real number", real())
    scale: str = _f("linear", "one of " + ", ".join(SCALES), one_of(*SCALES))


@dataclass
class WorkloadConfig:
    """What every workload has; a task's schema (below) adds its model and data options, and declares what
    the task evaluates, the data sets it knows (empty: any), and whether its pipeline augments (and so has
    echo points before and after augmentation)."""

    metrics: ClassVar[tuple[str, ...]] = ()
    datasets: ClassVar[tuple[str, ...]] = ()
    augments: ClassVar[bool] = False

    name: str = _f(MISSING, "a workload name", text)
    task: str = _f(MISSING, "a registered task or module:Class of your own", text)
    dataset: str = _f(MISSING, "a dataset the task can read", text)
    train_split: str = _f("train", "a split of the dataset", text)
    eval_split: str = _f("test", "a split of the dataset", text)
    eval_examples: Optional[int] = _f(None, "null (the whole split) or an integer >= 1", optional(integer(1)))
    batch_size: int = _f(128, f"an integer >= 1 and <= {MAX_BATCH}", integer(1, MAX_BATCH))
    eval_batch_size: int = _f(1000, f"an integer >= 1 and <= {MAX_BATCH}", integer(1, MAX_BATCH))
    shuffle_buffer: int = _f(10_000, f"an integer >= 1 (the shuffle before the echo stages), at most {MAX_BUFFER}",
                             integer(1, MAX_BUFFER))
    # The echo point that `echo=default` uses: the one the paper recommends for this kind of pipeline.
    echo_placement: str = _f("before_augmentation", "one of " + ", ".join(PLACEMENTS), one_of(*PLACEMENTS))
    target: TargetConfig = _f(allowed="metric, value, mode", default_factory=TargetConfig)
    # What a tuning study searches over (see tuning.py).
    search_space: List[SearchDimension] = _f(allowed="a list of key, low, high, scale", default_factory=list)


RESNET_DEPTHS = "6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110)"


@dataclass
class ResNetConfig:
    arch: str = _f("resnet_cifar", "one of resnet_cifar, resnet50", one_of("resnet_cifar", "resnet50"))
    depth: int = _f(32, RESNET_DEPTHS + "; resnet_cifar only", lambda v: is_int(v) and v >= 8 and (v - 2) % 6 == 0)
    width: Optional[int] = _f(None, "null (16 for resnet_cifar, 64 for resnet50) or an integer >= 1",
                              optional(integer(1)))


@dataclass
class ImageAugmentConfig:
    crop_padding: int = _f(0, "an integer >= 0 (pad, then crop back at random; 0 = none)", integer(0))
    flip: bool = _f(False, "true or false", boolean)
    image_size: Optional[int] = _f(None, "null (the stored size) or an integer >= 8", optional(integer(8)))
    random_resized_crop: bool = _f(False, "true or false (needs image_size)", boolean)

    @staticmethod
    def rules(node: Any, prefix: str) -> Iterator[ConfigError]:
        if node.random_resized_crop and not node.image_size:
            yield ConfigError(f"{prefix}.random_resized_crop", True, f"false unless {prefix}.image_size is set")


@dataclass
class ImageClassificationConfig(WorkloadConfig):
    metrics: ClassVar[tuple[str, ...]] = ("accuracy", "loss")
    datasets: ClassVar[tuple[str, ...]] = ("fashion_mnist", "cifar10", "imagenet2012", "synthetic_images")
    augments: ClassVar[bool] = True

    augment: ImageAugmentConfig = _f(allowed="augmentation options", default_factory=ImageAugmentConfig)
    model: ResNetConfig = _f(allowed="model options", default_factory=ResNetConfig)
    label_smoothing: float = _f(0.0, "a real number in [0, 1)", real(0, 1, high_open=True))


@dataclass
class TransformerConfig:
    arch: str = _f("transformer", "transformer", one_of("transformer"))
    d_model: int = _f(512, "an integer >= 1", integer(1))
    num_layers: int = _f(6, "an integer >= 1", integer(1))
    num_heads: int = _f(8, "an integer >= 1 dividing d_model into an even head size", integer(1))
    mlp_dim: int = _f(2048, "an integer >= 1", integer(1))
    dropout: float = _f(0.1, "a real number in [0, 1)", real(0, 1, high_open=True))
    positions: str = _f("learned", "one of learned, rotary", one_of("learned", "rotary"))
    tie_embeddings: bool = _f(True, "true or false", boolean)

    @staticmethod
    def rules(node: Any, prefix: str) -> Iterator[ConfigError]:
        if node.d_model % node.num_heads or (node.d_model // node.num_heads) % 2:
            yield ConfigError(f"{prefix}.num_heads", node.num_heads,
                              f"a divisor of d_model={node.d_model} leaving an even head size")


@dataclass
class TextConfig:
    seq_len: int = _f(128, "an integer >= 8 (tokens per packed sequence)", integer(8))
    tokenizer: str = _f("byte", "one of byte, sentencepiece", one_of("byte", "sentencepiece"))
    vocab_size: int = _f(8000, "an integer >= 300 (sentencepiece; bytes have 257)", integer(300))
    pack_docs: int = _f(64, "an integer >= 1 (documents packed together)", integer(1))
    doc_shuffle_buffer: int = _f(1024, "an integer >= 1", integer(1))


@dataclass
class LanguageModelConfig(WorkloadConfig):
    metrics: ClassVar[tuple[str, ...]] = ("loss", "accuracy", "perplexity")

    text: TextConfig = _f(allowed="text options", default_factory=TextConfig)
    model: TransformerConfig = _f(allowed="model options", default_factory=TransformerConfig)


@dataclass
class SSDConfig:
    arch: str = _f("ssd", "ssd", one_of("ssd"))
    stage_sizes: List[int] = _f(allowed="a list of integers >= 1 (blocks per stage)",
                                check=nonempty_list(integer(1)), default_factory=lambda: [1, 1, 1, 1])
    width: int = _f(16, "an integer >= 1", integer(1))
    levels: int = _f(3, "an integer >= 1, at most the number of stages", integer(1))
    stem_stride: int = _f(2, "an integer >= 1", integer(1))

    @staticmethod
    def rules(node: Any, prefix: str) -> Iterator[ConfigError]:
        if node.levels > len(node.stage_sizes):
            yield ConfigError(f"{prefix}.levels", node.levels,
                              f"an integer from 1 to {len(node.stage_sizes)} (the stages)")


@dataclass
class DetectionAugmentConfig:
    random_crop: bool = _f(False, "true or false", boolean)
    flip: bool = _f(False, "true or false", boolean)
    photometric: bool = _f(False, "true or false", boolean)


@dataclass
class DetectionOptions:
    image_size: int = _f(300, "an integer >= 1", integer(1))
    max_boxes: int = _f(100, "an integer >= 1", integer(1))
    score_threshold: float = _f(0.05, "a real number in [0, 1)", real(0, 1, high_open=True))
    max_detections: int = _f(100, "an integer >= 1", integer(1))


@dataclass
class DetectionConfig(WorkloadConfig):
    metrics: ClassVar[tuple[str, ...]] = ("map", "map50")
    datasets: ClassVar[tuple[str, ...]] = ("fashion_mnist_detection", "coco/2017")
    augments: ClassVar[bool] = True

    augment: DetectionAugmentConfig = _f(allowed="augmentation options", default_factory=DetectionAugmentConfig)
    detection: DetectionOptions = _f(allowed="detection options", default_factory=DetectionOptions)
    model: SSDConfig = _f(allowed="model options", default_factory=SSDConfig)


TASK_SCHEMAS = {"image_classification": ImageClassificationConfig, "language_model": LanguageModelConfig,
                "detection": DetectionConfig}
SCHEDULES = ("constant", "linear_decay", "piecewise_exponential")


@dataclass
class CustomWorkloadConfig(WorkloadConfig):
    """The schema of a user's own workload (``task: module:Class``; its YAML starts from
    ``/workload_schema@workload: custom``): the keys every workload has, and ``options`` for the class to read.
    The class's ``config_class`` is a subclass of this one that declares ``metrics`` (and ``augments``,
    ``datasets``) as ClassVars, the way the built-in schemas above do."""

    options: Dict[str, Any] = _f(allowed="a mapping of the workload's own options", default_factory=dict)


def task_schema(task: str) -> type:
    """The config schema of a task: a built-in one, or the ``config_class`` of a user's ``module:Class``
    (imported here: a user's task is known only from its code). Raises ConfigError."""
    if task in TASK_SCHEMAS:
        return TASK_SCHEMAS[task]
    allowed = "one of " + ", ".join(TASK_SCHEMAS) + ", or module:Class naming a Workload subclass you can import"
    module, _, name = task.partition(":")
    if not (module and name):
        raise ConfigError("workload.task", task, allowed)
    try:
        cls = getattr(importlib.import_module(module), name)
    except ImportError as e:
        raise ConfigError("workload.task", task, f"{allowed} (importing {module} failed: {e})") from None
    except AttributeError:
        raise ConfigError("workload.task", task, f"{allowed} ({module} has no {name})") from None
    schema = getattr(cls, "config_class", None)
    if not (isinstance(schema, type) and issubclass(schema, CustomWorkloadConfig) and schema.metrics):
        raise ConfigError("workload.task", task, (
            f"{allowed}: its config_class must be a subclass of echo_experiments.config.CustomWorkloadConfig "
            "that declares metrics"))
    return schema


@dataclass
class OptimizerConfig:
    name: str = _f("momentum", "one of momentum", one_of("momentum"))
    learning_rate: float = _f(0.1, "a real number > 0", real(0, low_open=True))
    momentum: float = _f(0.9, "a real number in [0, 1)", real(0, 1, high_open=True))
    nesterov: bool = _f(True, "true or false", boolean)
    weight_decay: float = _f(0.0, "a real number >= 0", real(0))
    schedule: str = _f("constant", "one of " + ", ".join(SCHEDULES), one_of(*SCHEDULES))
    final_fraction: float = _f(0.0, "a real number in [0, 1] (linear_decay ends at learning_rate x this)", real(0, 1))
    decay_factor: float = _f(0.1, "a real number in (0, 1] (piecewise_exponential: the rate is multiplied by it "
                                  "at each boundary)", real(0, 1, low_open=True))
    # The schedule in fresh examples (see optim.py): every echo factor gets the same rate per fresh example.
    warmup_fresh_examples: int = _f(0, "an integer >= 0 (fresh examples of linear warmup)", integer(0))
    decay_fresh_examples: Optional[int] = _f(None, "null (= trainer.max_fresh_examples) or an integer >= 1 "
                                                   "(fresh examples of linear decay, after the warmup)",
                                             optional(integer(1)))
    decay_boundaries_fresh_examples: List[int] = _f(allowed="a list of increasing integers >= 1 (fresh examples "
                                                            "after the warmup)", check=increasing(integer(1)),
                                                    default_factory=list)
    # The same in steps, only for a user who asks for steps: any of them set puts the whole schedule in steps.
    warmup_steps: Optional[int] = _f(None, "null or an integer >= 0", optional(integer(0)))
    decay_steps: Optional[int] = _f(None, "null (= trainer.max_steps) or an integer >= 1", optional(integer(1)))
    decay_boundaries_steps: List[int] = _f(allowed="a list of increasing integers >= 1 (steps after the warmup)",
                                           check=increasing(integer(1)), default_factory=list)


@dataclass
class TrainerConfig:
    # The budget, in fresh examples like everything a condition could be favoured by (PROTOCOL.md).
    max_fresh_examples: Optional[int] = _f(1_000_000, "null or an integer >= 1 (stop once this many fresh "
                                                      "examples were read)", optional(integer(1)))
    eval_every_fresh_examples: int = _f(10_000, "an integer >= 1", integer(1))
    # A cap in steps, for a user who asks for one; null = none.
    max_steps: Optional[int] = _f(None, "null or an integer >= 1 (stop after this many steps)", optional(integer(1)))
    stop_at_target: bool = _f(True, "true or false", boolean)
    # Start the run directory over (its summary, metrics, event files and checkpoints are deleted first); by
    # default a rerun resumes an interrupted or failed run and leaves a complete one alone.
    restart: bool = _f(False, "true or false (true: delete the run directory's earlier attempt and start over)",
                       boolean)
    progress: bool = _f(True, "true or false (a progress bar is drawn only on a terminal)", boolean)
    # TensorBoard event files in <run dir>/tb (events.py): curves on steps and on fresh examples, HParams.
    tensorboard: bool = _f(True, "true or false (TensorBoard event files in <run dir>/tb)", boolean)
    # Orbax checkpoints (with the input iterator's state) at the first step after this many seconds of training
    # since the last one, every checkpoint_every_steps steps, and at the end. A checkpoint of the default run
    # costs about 1.5 s (the shuffle buffer's contents), so a time cadence bounds the cost at any step rate.
    checkpoint_every_seconds: float = _f(600.0, "a real number >= 0 (0 = not by time)", real(0))
    checkpoint_every_steps: int = _f(0, "an integer >= 0 (0 = not by step count)", integer(0))
    precision: str = _f("float32", "one of float32, bfloat16 (bfloat16 compute, float32 parameters)",
                        one_of("float32", "bfloat16"))
    # Split each batch over every device (one mesh axis "data"); false: one device.
    data_parallel: bool = _f(True, "true or false", boolean)
    # Several processes (hosts): jax.distributed.initialize() reads SLURM, Open MPI or TPU settings, or the
    # three keys below (every process gets the same coordinator and count, each its own id).
    distributed: bool = _f(False, "true or false", boolean)
    coordinator_address: Optional[str] = _f(None, "null (found from SLURM, Open MPI or the TPU slice) or host:port "
                                                  "of process 0", optional(text))
    num_processes: Optional[int] = _f(None, "null or an integer >= 1", optional(integer(1)))
    process_id: Optional[int] = _f(None, "null or an integer >= 0", optional(integer(0)))
    # How long a process waits for its peers to join, and for a lost peer's heartbeat before it gives up.
    distributed_timeout_s: int = _f(300, "an integer >= 1 (seconds)", integer(1))
    # Batches and steps timed before training for the summary's timing facts (see timing.py); 0 = none.
    profile_batches: int = _f(20, "an integer >= 0 (0 = no timing facts)", integer(0))
    # JAX's persistent compilation cache: a rerun of the same shapes skips XLA compilation.
    compilation_cache_dir: Optional[str] = _f("~/.cache/echo_experiments/jax", "null (no cache) or a directory path",
                                              optional(text))


SAMPLERS = ("halton", "sobol")


@dataclass
class TuningConfig:
    # Both null outside a study. With -m tuning=study, the sweep runs every (study, trial) pair.
    study: Optional[int] = _f(None, "null or an integer >= 0", optional(integer(0)))
    trial: Optional[int] = _f(None, "null or an integer >= 0", optional(integer(0)))
    studies: int = _f(2, "an integer >= 1 (independent repeats of the search)", integer(1))
    trials: int = _f(8, "an integer >= 1 (trials per study)", integer(1))
    seed: int = _f(0, "an integer >= 0 (seeds the quasi-random sequences)", integer(0, MAX_SEED))
    sampler: str = _f("halton", "one of " + ", ".join(SAMPLERS), one_of(*SAMPLERS))
    # A trial whose fresh examples pass the best fresh examples to target of its study's finished trials can
    # no longer be the study's best: it stops, recorded as pruned (never as reached).
    prune: bool = _f(True, "true or false", boolean)
    # 1: stop at the study's best; 1.5: only past 1.5 x it, so a paired comparison learns more from the trial.
    prune_margin: float = _f(1.0, "a real number >= 1 (a trial is pruned once its fresh examples reach this times "
                                  "its study's best)", real(1))


STORAGE_KINDS = ("local", "http", "emulated")


@dataclass
class StorageConfig:
    # Where training records are read from; see echo_experiments/data/storage.py.
    kind: str = _f("local", "one of " + ", ".join(STORAGE_KINDS), one_of(*STORAGE_KINDS))
    latency_ms: float = _f(0.0, "a real number >= 0 (milliseconds per request)", real(0))
    bandwidth_mb_s: Optional[float] = _f(None, "null (unlimited) or a real number > 0 (MB/s per request)",
                                         optional(real(0, low_open=True)))
    parallel_reads: int = _f(1, "an integer >= 1 (requests in flight)", integer(1))
    url: Optional[str] = _f(None, "null, or with storage.kind=http a record server's http:// URL",
                            optional(lambda v: isinstance(v, str) and v.startswith("http://")))


@dataclass
class DataConfig:
    # Where TFDS data sets live; null = $TFDS_DATA_DIR, else ~/tensorflow_datasets (TFDS's own default).
    # A given folder must exist: a mistyped path is refused rather than created and filled.
    dir: Optional[str] = _f(None, "null ($TFDS_DATA_DIR, else ~/tensorflow_datasets) or an existing folder",
                            optional(lambda v: text(v) and os.path.isdir(os.path.expanduser(os.path.expandvars(v)))))
    # A tf.data service dispatcher (grpc://host:port) whose workers read, decode and shuffle; echoing stays local.
    service: Optional[str] = _f(None, "null or a tf.data service address grpc://host:port",
                                optional(lambda v: isinstance(v, str) and v.startswith("grpc://")))
    # The longest any wait on something outside the process may take: reaching the tf.data service
    # dispatcher or the record server, and the next batch from the input pipeline (its workers, the server,
    # the storage). Past it the run ends with one line naming what it waited for; its checkpoints stay.
    timeout_s: float = _f(300.0, "a real number > 0 (seconds)", real(0, low_open=True))


@dataclass
class Config:
    workload: WorkloadConfig = _f(allowed="a workload", default_factory=WorkloadConfig)
    echo: EchoConfig = _f(allowed="an echo config", default_factory=EchoConfig)
    optimizer: OptimizerConfig = _f(allowed="an optimizer config", default_factory=OptimizerConfig)
    trainer: TrainerConfig = _f(allowed="a trainer config", default_factory=TrainerConfig)
    data: DataConfig = _f(allowed="a data config", default_factory=DataConfig)
    storage: StorageConfig = _f(allowed="a storage config", default_factory=StorageConfig)
    tuning: TuningConfig = _f(allowed="a tuning config", default_factory=TuningConfig)
    seed: int = _f(0, f"an integer in [0, {MAX_SEED}]", integer(0, MAX_SEED))


_store = ConfigStore.instance()
_store.store(name="base_config", node=Config)
for _task, _schema in {**TASK_SCHEMAS, "custom": CustomWorkloadConfig}.items():
    _store.store(group="workload_schema", name=_task, node=_schema)


def short_name(name: str, limit: int = 120) -> str:
    """A directory name from a job's overrides, cut to a length every file system takes (with a hash)."""
    if len(name) <= limit:
        return name
    return f"{name[:limit - 13]}-{hashlib.sha1(name.encode()).hexdigest()[:12]}"


OmegaConf.register_new_resolver("short_name", short_name, replace=True)
# Integer arithmetic for presets whose budgets depend on the echo factor: ${max:4000,${mul:2000,${echo.factor}}}
OmegaConf.register_new_resolver("mul", lambda a, b: int(round(float(a) * float(b))), replace=True)
OmegaConf.register_new_resolver("max", lambda a, b: max(a, b), replace=True)


# --- looking up and checking fields ---------------------------------------------------------------------

def _field_at(schema: type, parts: list[str]):
    node, found = schema, None
    for part in parts:
        match = [f for f in fields(node) if f.name == part] if is_dataclass(node) else []
        if not match:
            return None
        found = match[0]
        node = found.type
    return found


def schema_field(key: str):
    """The dataclass field of a dotted key, looked up in the schema (workload keys in every task's schema)."""
    parts = [p for p in key.split(".") if p]
    candidates = [(Config, parts)]
    if parts[:1] == ["workload"] and len(parts) > 1:
        candidates += [(schema, parts[1:]) for schema in (*TASK_SCHEMAS.values(), CustomWorkloadConfig)]
    for root, path in candidates:
        found = _field_at(root, path)
        if found is not None:
            return found
    return None


def allowed_for(key: str) -> str:
    """The sentence of allowed values for a dotted key, e.g. ``echo.factor``; "" if unknown."""
    found = schema_field(key)
    return found.metadata.get("allowed", "") if found is not None else ""


def keys_of(key: str) -> list[str]:
    """The field names under a dotted section key ("" for the root); [] if it is not a typed section."""
    if not key:
        return [f.name for f in fields(Config)]
    found = schema_field(key)
    return [f.name for f in fields(found.type)] if found is not None and is_dataclass(found.type) else []


def _walk(node: Any, prefix: str) -> Iterator[ConfigError]:
    """Every field of a typed section whose value its own check refuses, then the section's cross-key rules."""
    schema = OmegaConf.get_type(node)
    if not is_dataclass(schema):
        return
    for f in fields(schema):
        key = f"{prefix}{f.name}"
        if OmegaConf.is_missing(node, f.name):
            allowed = f.metadata.get("allowed", "")
            yield ConfigError(key, None, allowed, f"{key} is missing: {allowed}")
            continue
        value = node[f.name]
        check = f.metadata.get("check")
        if check is not None and not check(value):
            yield ConfigError(key, value, f.metadata.get("allowed", ""))
        elif isinstance(value, DictConfig):
            yield from _walk(value, f"{key}.")
        elif isinstance(value, ListConfig):
            for i, item in enumerate(value):
                if isinstance(item, DictConfig):
                    yield from _walk(item, f"{key}[{i}].")
    rules = getattr(schema, "rules", None)
    if rules is not None:
        yield from rules(node, prefix.rstrip("."))


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError for the first value that is not allowed (no data is read, nothing heavy imported)."""
    e, w, t = cfg.echo, cfg.workload, cfg.trainer
    schema = task_schema(w.task)
    typed_as = CustomWorkloadConfig if issubclass(schema, CustomWorkloadConfig) else schema
    if not issubclass(OmegaConf.get_type(w), typed_as):
        named = "custom" if typed_as is CustomWorkloadConfig else w.task
        raise ConfigError("workload", w.name, (
            f"a workload config typed for task {w.task}: start its YAML with "
            f"`defaults: [/workload_schema@workload: {named}]`"))
    for error in _walk(cfg, ""):
        raise error
    # What the task declares, and the rules that relate two keys, each stated once.
    if schema.datasets and w.dataset not in schema.datasets:
        raise ConfigError("workload.dataset", w.dataset, "one of " + ", ".join(schema.datasets))
    if w.target.metric not in schema.metrics:
        raise ConfigError("workload.target.metric", w.target.metric, "one of " + ", ".join(schema.metrics))
    placements = tuple(p.value for p in Placement.for_pipeline(schema.augments))
    if e.placement not in placements:
        raise ConfigError("echo.placement", e.placement,
                          f"workload {w.name} has no such stage; one of {', '.join(placements)}")
    if e.placement == "none" and e.factor != 1:
        raise ConfigError(
            "echo.placement", e.placement,
            f"echo.factor={show(e.factor)} needs an echo point: "
            f"one of {', '.join(p for p in placements if p != 'none')}")
    o = cfg.optimizer
    step_keys = [k for k in ("warmup_steps", "decay_steps") if o[k] is not None]
    step_keys += ["decay_boundaries_steps"] if o.decay_boundaries_steps else []
    fresh_keys = [k for k in ("warmup_fresh_examples", "decay_fresh_examples") if o[k]]
    fresh_keys += ["decay_boundaries_fresh_examples"] if o.decay_boundaries_fresh_examples else []
    if step_keys and fresh_keys:
        raise ConfigError(f"optimizer.{step_keys[0]}", o[step_keys[0]], (
            f"null while optimizer.{fresh_keys[0]} is set: a schedule is in fresh examples or in steps, not both"))
    if t.max_fresh_examples is None and t.max_steps is None:
        raise ConfigError("trainer.max_fresh_examples", None, "an integer >= 1 unless trainer.max_steps is set "
                          "(a run needs a budget)")
    if o.schedule == "linear_decay":
        length, budget = (("decay_steps", "max_steps") if step_keys else ("decay_fresh_examples", "max_fresh_examples"))
        if o[length] is None and t[budget] is None:
            raise ConfigError(f"optimizer.{length}", None, f"an integer >= 1 unless trainer.{budget} is set "
                              "(a linear decay needs a length)")
    st = cfg.storage
    if st.url is not None and st.kind != "http":
        raise ConfigError("storage.url", st.url, allowed_for("storage.url"))
    service = cfg.data.service
    if service is not None and st.kind != "local":
        raise ConfigError("storage.kind", st.kind, "local with data.service (the service reads the data)")
    for key in ("checkpoint_every_seconds", "checkpoint_every_steps"):
        if service is not None and t[key]:
            raise ConfigError(f"trainer.{key}", t[key], "0 with data.service (the service's workers hold the "
                              "input's state, which no checkpoint can save)")


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)


__all__ = ["Config", "ConfigError", "Placement", "PLACEMENTS", "TASK_SCHEMAS", "allowed_for", "keys_of", "show",
           "validate"]
