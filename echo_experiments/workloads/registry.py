"""The task registry: every task's config schema and workload class, in one table, and the rules that relate
a workload to the rest of the config.

A workload config's ``task`` names a registered task or a user's own ``module:Class`` (docs/your-model.md).
Adding a task is one line in TASKS, its workload module and schema module beside each other, and its YAML in
conf/workload/. This module imports no TensorFlow or JAX: the command line validates every job with it
before anything heavy loads; a task's class is imported only by :func:`task_class`.
"""

import importlib
import inspect
import threading
import traceback
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from echo_experiments.core import config, rules
from echo_experiments.core import schema as schema_checks
from echo_experiments.core.config import CustomWorkloadConfig
from echo_experiments.core.placement import Placement
from echo_experiments.core.schema import ConfigError, show
from echo_experiments.workloads.detection_schema import DetectionConfig
from echo_experiments.workloads.image_classification_schema import ImageClassificationConfig
from echo_experiments.workloads.language_model_schema import LanguageModelConfig


@dataclass(frozen=True)
class Task:
    schema: type  # the task's workload config schema: what the task declares (metrics, datasets, augments)
    workload: str  # module:Class of its workload, imported when a run starts


TASKS = {
    "image_classification": Task(ImageClassificationConfig,
                                 "echo_experiments.workloads.image_classification:ImageClassification"),
    "language_model": Task(LanguageModelConfig, "echo_experiments.workloads.language_model:LanguageModel"),
    "detection": Task(DetectionConfig, "echo_experiments.workloads.detection:Detection"),
}
SCHEMAS = tuple(t.schema for t in TASKS.values())

# conf/workload/*.yaml start from these (`defaults: [/workload_schema@workload: <task>]`).
for _name, _schema in {**{n: t.schema for n, t in TASKS.items()}, "custom": CustomWorkloadConfig}.items():
    ConfigStore.instance().store(group="workload_schema", name=_name, node=_schema)


# A user's module that has not finished importing after this long waits on something (a lock, the network, input):
# the command says so instead of waiting with it.
IMPORT_TIMEOUT_S = 120.0


def _import(task: str) -> Any:
    """The object a ``module:Class`` task names; ConfigError when it cannot be imported, whatever its import raised
    (its file and line named), ended (sys.exit) or waited on past IMPORT_TIMEOUT_S."""
    allowed = "one of " + ", ".join(TASKS) + ", or module:Class naming a Workload subclass you can import"
    module, _, name = task.partition(":")
    if not (module and name) or module.startswith("."):
        raise ConfigError("workload.task", task, allowed)
    try:
        imported = _bounded_import(module)
    except ImportError as e:
        raise ConfigError("workload.task", task, f"{allowed} (importing {module} failed: {e}; is its folder on "
                          "PYTHONPATH, or the current folder?)") from None
    except TimeoutError:
        raise ConfigError("workload.task", task, "", (
            f"workload.task={task}: importing {module} did not finish within {IMPORT_TIMEOUT_S:g} s: does it wait "
            "on something as it is imported (a lock, the network, input)?")) from None
    except (Exception, SystemExit) as e:  # the user's code, as it runs on import: one line naming where
        said = (e.msg if isinstance(e, SyntaxError) else str(e).strip().splitlines()[0][:200] if str(e).strip()
                else "")
        raise ConfigError("workload.task", task, "", (
            f"workload.task={task}: importing {module} raised {type(e).__name__}{_where(e)}"
            + (f": {said}" if said else ""))) from None
    try:
        return getattr(imported, name)
    except AttributeError:
        raise ConfigError("workload.task", task, f"{allowed} ({module} has no {name})") from None


def _bounded_import(module: str) -> Any:
    """importlib.import_module on a daemon thread, waited for at most IMPORT_TIMEOUT_S (TimeoutError past it)."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["module"] = importlib.import_module(module)
        except BaseException as e:  # handed to the caller, which says it in one line
            done["error"] = e
    thread = threading.Thread(target=run, name=f"import {module}", daemon=True)
    thread.start()
    thread.join(IMPORT_TIMEOUT_S)
    if thread.is_alive():
        raise TimeoutError(module)
    if "error" in done:
        raise done["error"]
    return done["module"]


def _where(error: BaseException) -> str:
    """`` at file:line``: the place in the user's code an error came from (a syntax error's own place)."""
    if isinstance(error, SyntaxError) and error.filename:
        return f" at {error.filename}:{error.lineno}"
    frames = traceback.extract_tb(error.__traceback__)
    mine = [f for f in frames if "importlib" not in f.filename and "echo_experiments" not in f.filename]
    return f" at {mine[-1].filename}:{mine[-1].lineno}" if mine else ""


def task_schema(task: str) -> type:
    """The config schema of a task: a registered one, or the ``config_class`` of a user's ``module:Class``
    (imported here: a user's task is known only from its code). Raises ConfigError."""
    if task in TASKS:
        return TASKS[task].schema
    schema = getattr(_import(task), "config_class", None)
    if not (isinstance(schema, type) and issubclass(schema, CustomWorkloadConfig) and schema.metrics):
        raise ConfigError("workload.task", task, (
            "one of " + ", ".join(TASKS) + ", or module:Class naming a Workload subclass you can import: its "
            "config_class must be a subclass of echo_experiments.workloads.CustomWorkloadConfig that declares "
            "metrics"))
    return schema


def task_class(task: str) -> type:
    """The workload class of a task, checked against the contract in base.py. Raises ConfigError naming what it
    lacks. Imports TensorFlow and JAX."""
    from echo_experiments.workloads.base import Workload

    schema = task_schema(task)
    cls = _import(TASKS[task].workload if task in TASKS else task)
    name = task.rpartition(":")[2] if task not in TASKS else cls.__name__
    if not (inspect.isclass(cls) and issubclass(cls, Workload)):
        raise ConfigError("workload.task", task, "module:Class naming a subclass of "
                          "echo_experiments.workloads.Workload")
    lacks = sorted(cls.__abstractmethods__)
    if schema.augments and cls.augment is Workload.augment and cls.augment_chunk is Workload.augment_chunk:
        lacks.append("augment or augment_chunk (its config_class says augments=True)")
    if lacks:
        raise ConfigError("workload.task", task, f"a complete Workload: {name} lacks {', '.join(lacks)}",
                          f"workload.task={task}: {name} lacks {', '.join(lacks)} (see the Workload contract in "
                          "echo_experiments/workloads/base.py)")
    return cls


def placements(schema: type) -> tuple[str, ...]:
    """The echo placements a task's pipeline has."""
    return tuple(p.value for p in Placement.for_pipeline(schema.augments))


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError for the first value that is not allowed: each field's own check, what the task
    declares (data sets, metrics, echo points), then the rules between shared keys (rules.py)."""
    e, w = cfg.echo, cfg.workload
    schema = task_schema(w.task)
    typed_as = CustomWorkloadConfig if issubclass(schema, CustomWorkloadConfig) else schema
    if not issubclass(OmegaConf.get_type(w), typed_as):
        named = "custom" if typed_as is CustomWorkloadConfig else w.task
        raise ConfigError("workload", w.name, (
            f"a workload config typed for task {w.task}: start its YAML with "
            f"`defaults: [/workload_schema@workload: {named}]`"))
    schema_checks.check_values(cfg)
    if schema.datasets and w.dataset not in schema.datasets:
        raise ConfigError("workload.dataset", w.dataset, "one of " + ", ".join(schema.datasets))
    if w.target.metric not in schema.metrics:
        raise ConfigError("workload.target.metric", w.target.metric, "one of " + ", ".join(schema.metrics))
    points = placements(schema)
    if e.placement not in points:
        raise ConfigError("echo.placement", e.placement,
                          f"workload {w.name} has no such stage; one of {', '.join(points)}")
    if e.placement == Placement.NONE.value and e.factor != 1:
        raise ConfigError("echo.placement", e.placement, f"echo.factor={show(e.factor)} needs an echo point: "
                          f"one of {', '.join(p for p in points if p != Placement.NONE.value)}")
    rules.check_rules(cfg)


def schema_field(key: str):
    """The schema field of a dotted key, ``workload.*`` keys looked up in every task's schema."""
    return config.schema_field(key, SCHEMAS)


def allowed_for(key: str) -> str:
    return config.allowed_for(key, SCHEMAS)


def keys_of(key: str) -> list[str]:
    return config.keys_of(key, SCHEMAS)
