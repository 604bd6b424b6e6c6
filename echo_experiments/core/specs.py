"""Small typed specs, made once from a run's config where the library is entered (for a run, the front door
workloads/run_check.py; the benchmark; the tf.data service): the input pipeline, the learning-rate schedule and
optimizer, the trainer's loop, the device mesh, the store and the trial. Library code takes these, never the
whole config, so what a module depends on is written in its signature.
"""

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

from omegaconf import OmegaConf

from echo_experiments.core.placement import NO_ECHO, EchoSpec

FRESH_EXAMPLES, STEPS = "fresh_examples", "steps"


@dataclass(frozen=True)
class PipelineSpec:
    """What data/stream.py builds: batches of ``batch_size`` after a shuffle of ``shuffle_buffer`` examples, the
    echo stage ``echo``, all random stages seeded from ``seed``; ``service``: a tf.data service address."""

    batch_size: int
    shuffle_buffer: int
    seed: int
    echo: EchoSpec = NO_ECHO
    service: Optional[str] = None

    @classmethod
    def from_config(cls, cfg: Any) -> "PipelineSpec":
        return cls(int(cfg.workload.batch_size), int(cfg.workload.shuffle_buffer), int(cfg.seed),
                   EchoSpec.from_config(cfg.echo), cfg.data.service)

    def without_echo(self) -> "PipelineSpec":
        """The plain pipeline (what the profiler times upstream)."""
        return replace(self, echo=NO_ECHO)

    @property
    def echo_shuffle(self) -> int:
        """The effective shuffle buffer right after the echo stage (0: none)."""
        return self.echo.shuffle_size(self.batch_size)


@dataclass(frozen=True)
class ScheduleSpec:
    """The learning rate as a function of the run's position, in ``unit`` (fresh examples trained on before
    a step, or steps): ``kind`` after a linear ``warmup``; ``decay`` is the linear decay's length (the budget
    when not set), ``boundaries`` the piecewise decay's, each counted from the end of the warmup."""

    kind: str
    learning_rate: float
    unit: str = FRESH_EXAMPLES
    warmup: int = 0
    decay: Optional[int] = None
    final_fraction: float = 0.0
    boundaries: tuple[int, ...] = ()
    decay_factor: float = 0.1

    @classmethod
    def from_config(cls, optimizer: Any, trainer: Any) -> "ScheduleSpec":
        """A schedule in steps when any step key is set, else in fresh examples; a linear decay with no length
        of its own decays over the run's budget in the same unit."""
        o = optimizer
        if o.warmup_steps is not None or o.decay_steps is not None or o.decay_boundaries_steps:
            unit, warmup, decay = STEPS, o.warmup_steps or 0, o.decay_steps or trainer.max_steps
            boundaries = o.decay_boundaries_steps
        else:
            unit, warmup, decay = FRESH_EXAMPLES, o.warmup_fresh_examples, o.decay_fresh_examples
            decay, boundaries = decay or trainer.max_fresh_examples, o.decay_boundaries_fresh_examples
        return cls(o.schedule, float(o.learning_rate), unit, int(warmup), None if decay is None else int(decay),
                   float(o.final_fraction), tuple(int(b) for b in boundaries), float(o.decay_factor))


@dataclass(frozen=True)
class OptimizerSpec:
    """SGD with (Nesterov) ``momentum`` and L2 ``weight_decay`` on weight matrices and kernels."""

    momentum: float = 0.9
    nesterov: bool = True
    weight_decay: float = 0.0

    @classmethod
    def from_config(cls, optimizer: Any) -> "OptimizerSpec":
        return cls(float(optimizer.momentum), bool(optimizer.nesterov), float(optimizer.weight_decay))


@dataclass(frozen=True)
class TrainerSpec:
    """The training loop: its budget, evaluation cadence and stop rules (in fresh examples unless a step cap is
    given), checkpoints, outputs, and its waits (``timeout_s`` for the next batch)."""

    max_fresh_examples: Optional[int]
    eval_every_fresh_examples: int
    max_steps: Optional[int] = None
    stop_at_target: bool = True
    prune: bool = False  # a trial of a study that stops once it can no longer be the study's best
    prune_margin: float = 1.0
    checkpoint_every_seconds: float = 0.0
    checkpoint_every_steps: int = 0
    progress: bool = False
    tensorboard: bool = False
    precision: str = "float32"
    profile_batches: int = 0
    timeout_s: float = 300.0
    distributed_timeout_s: float = 300.0
    copy_worth_every: int = 0
    restart: bool = False  # start over in a run directory that holds a run
    compilation_cache_dir: Optional[str] = None

    @classmethod
    def from_config(cls, cfg: Any) -> "TrainerSpec":
        t, tuning = cfg.trainer, cfg.tuning
        return cls(
            t.max_fresh_examples, int(t.eval_every_fresh_examples), t.max_steps, bool(t.stop_at_target),
            tuning.study is not None and bool(tuning.prune) and bool(t.stop_at_target), float(tuning.prune_margin),
            float(t.checkpoint_every_seconds), int(t.checkpoint_every_steps), bool(t.progress), bool(t.tensorboard),
            t.precision, int(t.profile_batches), float(cfg.data.timeout_s), float(t.distributed_timeout_s),
            int(t.copy_worth_every), bool(t.restart), t.compilation_cache_dir)

    @property
    def checkpoints(self) -> bool:
        return bool(self.checkpoint_every_seconds or self.checkpoint_every_steps)


@dataclass(frozen=True)
class ParallelSpec:
    """The devices a run uses: every device (``data_parallel``) or one; several processes (``distributed``)
    joined through ``coordinator_address`` (None: found from SLURM, Open MPI or the TPU slice)."""

    data_parallel: bool = True
    distributed: bool = False
    coordinator_address: Optional[str] = None
    num_processes: Optional[int] = None
    process_id: Optional[int] = None
    timeout_s: int = 300
    coordinator_bind_address: Optional[str] = None

    @classmethod
    def from_config(cls, trainer: Any) -> "ParallelSpec":
        return cls(bool(trainer.data_parallel), bool(trainer.distributed), trainer.coordinator_address,
                   trainer.num_processes, trainer.process_id, int(trainer.distributed_timeout_s),
                   trainer.coordinator_bind_address)

    @property
    def bind_address(self) -> Optional[str]:
        """Where process 0's coordinator listens: the given address; loopback where the coordinator is on this
        machine (localhost or 127.x), so that nothing listens beyond it unless asked; else None, JAX's own
        choice, every interface (the other machines must reach it)."""
        if self.coordinator_bind_address or not self.coordinator_address:
            return self.coordinator_bind_address
        host, _, port = self.coordinator_address.rpartition(":")
        return f"127.0.0.1:{port}" if host in ("localhost", "::1", "[::1]") or host.startswith("127.") else None


@dataclass(frozen=True)
class StorageSpec:
    """Where training records are read from (data/storage.py): ``kind`` local, emulated or http; an emulated
    store's ``latency_ms`` a read (or ``latency_schedule``: spans of (reads, latency_ms) in turn, repeated) and
    ``bandwidth_mb_s``; ``parallel_reads`` requests in flight; ``read_unit`` record or example (what one read
    fetches); an http store's ``url`` (None: a loopback server of its own)."""

    kind: str = "local"
    latency_ms: float = 0.0
    bandwidth_mb_s: Optional[float] = None
    parallel_reads: int = 1
    read_unit: str = "record"
    url: Optional[str] = None
    latency_schedule: Optional[tuple[tuple[int, float], ...]] = None

    @classmethod
    def from_config(cls, storage: Any) -> "StorageSpec":
        schedule = storage.get("latency_schedule")
        return cls(storage.kind, float(storage.latency_ms),
                   None if storage.bandwidth_mb_s is None else float(storage.bandwidth_mb_s),
                   int(storage.parallel_reads), storage.read_unit, storage.url,
                   None if schedule is None else tuple((int(n), float(ms)) for n, ms in schedule))


@dataclass(frozen=True)
class TrialSpec:
    """Which run of a study this is: ``study`` and ``trial`` (None outside a study) and the study's
    ``tuning_seed``; ``searched``: the run's values for its workload's searched keys (the trial's draw, or the
    defaults), as TensorBoard's hparams show them."""

    study: Optional[int] = None
    trial: Optional[int] = None
    tuning_seed: Optional[int] = None
    searched: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Any) -> "TrialSpec":
        t = cfg.tuning
        in_study = t.study is not None
        return cls(t.study, t.trial, int(t.seed) if in_study else None,
                   {d.key: OmegaConf.select(cfg, d.key) for d in cfg.workload.search_space})


@dataclass(frozen=True)
class RunSpec:
    """Everything a run reads of its config: the specs above, the workload's own section (``workload``, which
    the workload takes), the TFDS folder ``data_dir`` (None: TFDS's own), and ``config``, the whole config
    resolved into plain values, as the run directory's config.yaml holds it."""

    seed: int
    pipeline: PipelineSpec
    schedule: ScheduleSpec
    optimizer: OptimizerSpec
    trainer: TrainerSpec
    parallel: ParallelSpec
    storage: StorageSpec = StorageSpec()
    trial: TrialSpec = TrialSpec()
    workload: Any = None
    data_dir: Optional[str] = None
    config: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Any) -> "RunSpec":
        return cls(int(cfg.seed), PipelineSpec.from_config(cfg), ScheduleSpec.from_config(cfg.optimizer, cfg.trainer),
                   OptimizerSpec.from_config(cfg.optimizer), TrainerSpec.from_config(cfg),
                   ParallelSpec.from_config(cfg.trainer), StorageSpec.from_config(cfg.storage),
                   TrialSpec.from_config(cfg), cfg.workload, cfg.data.dir,
                   OmegaConf.to_container(cfg, resolve=True))
