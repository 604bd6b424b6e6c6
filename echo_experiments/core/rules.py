"""The rules between shared config keys: each pair of keys that do not go together, and what to do instead,
stated once. A single key's allowed values are its field's, in config.py; the rules that relate the workload
to the rest are the registry's (workloads/registry.py). No TensorFlow or JAX: the command line checks every
job with them before anything heavy loads."""

from omegaconf import DictConfig

from echo_experiments.core.config import EchoConfig, allowed_for
from echo_experiments.core.placement import AUTO
from echo_experiments.core.schema import ConfigError

# echo.max_factor's default: only the autopilot reads it.
MAX_FACTOR_DEFAULT = EchoConfig.max_factor


def unused(cfg: DictConfig) -> list[str]:
    """Keys set away from their defaults that this run does not read, said in its first lines rather than refused:
    a preset may set them for the sweep's other jobs (autopilot_cpu's cap for its autopilot beside fixed factors)."""
    if cfg.echo.factor != AUTO and cfg.echo.max_factor != MAX_FACTOR_DEFAULT:
        return [f"echo.max_factor={cfg.echo.max_factor:g} is read only with echo.factor=auto: this run's fixed "
                "factor is its own cap"]
    return []


def check_rules(cfg: DictConfig) -> None:
    """Raise ConfigError for the first pair of shared keys that do not go together (each rule stated once)."""
    o, t = cfg.optimizer, cfg.trainer
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
    if cfg.echo.min_worth:
        raise ConfigError("echo.min_worth", cfg.echo.min_worth, "0 while no copy-worth estimate is chosen (the pilots "
                          "chose none: docs/protocol.md), so nothing could gate the autopilot's copies")
    if cfg.echo.replay is not None and cfg.echo.factor != AUTO:
        raise ConfigError("echo.replay", cfg.echo.replay, "null unless echo.factor=auto (only the autopilot's "
                          "decisions are recorded)")
    if cfg.echo.cap != "fixed" and (cfg.echo.factor != AUTO or cfg.echo.replay is not None):
        raise ConfigError("echo.cap", cfg.echo.cap, "fixed unless echo.factor=auto, and fixed with echo.replay (a "
                          "replay makes recorded decisions again; a moving cap follows the training)")
    st = cfg.storage
    if st.latency_schedule is not None and st.kind != "emulated":
        raise ConfigError("storage.latency_schedule", list(st.latency_schedule), "null unless storage.kind=emulated")
    if st.read_unit == "example" and st.kind != "emulated":
        raise ConfigError("storage.read_unit", st.read_unit, "record unless storage.kind=emulated (only the "
                          "emulated store serves the workload's examples)")
    if st.url is not None and st.kind != "http":
        raise ConfigError("storage.url", st.url, allowed_for("storage.url"))
    service = cfg.data.service
    if service is not None and st.kind != "local":
        raise ConfigError("storage.kind", st.kind, "local with data.service (the service reads the data)")
    for key in ("checkpoint_every_seconds", "checkpoint_every_steps"):
        if service is not None and t[key]:
            raise ConfigError(f"trainer.{key}", t[key], "0 with data.service (the service's workers hold the "
                              "input's state, which no checkpoint can save)")
    _check_processes(t)


def _check_processes(t: DictConfig) -> None:
    """Several processes given by hand: the coordinator, the count and this process's id together, the id one
    of the count (JAX's own checks of these end in tracebacks)."""
    if not t.distributed or t.coordinator_address is None:
        return
    for key, allowed in (("num_processes", "an integer >= 1"), ("process_id", "an integer >= 0")):
        if t[key] is None:
            raise ConfigError(f"trainer.{key}", None, f"{allowed} with trainer.coordinator_address (every process "
                              "is given the count and its own id)")
    if t.process_id >= t.num_processes:
        raise ConfigError("trainer.process_id", t.process_id, f"an integer from 0 to {t.num_processes - 1} (one of "
                          f"the trainer.num_processes={t.num_processes} processes)")
