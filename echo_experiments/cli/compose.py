"""Composing every job a command line runs, with Hydra's compose API, and Hydra's errors turned into one line.

Hydra reports a composition error over several lines, and a sweep would meet a bad value only at the job that
has it; here every job is composed (a condition's other tuning trials set on its first's config; past
MAX_COMBINATIONS, every condition and every value once) before any runs, and each error becomes a ConfigError
naming the key, the value and what is allowed.
"""

import copy
import itertools
import math
import re
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

import yaml
from hydra import compose, initialize_config_module
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from echo_experiments.cli import log_config
from echo_experiments.core import schema
from echo_experiments.core.schema import ConfigError
from echo_experiments.workloads import registry

CONFIG_MODULE = "echo_experiments.conf"
# Past this many combinations each swept value is checked once, not every product.
MAX_COMBINATIONS = 128
# The keys that pick a tuning trial: the same condition in every trial (tuning.py).
TRIAL_KEYS = ("tuning.study", "tuning.trial")
# The short run that measures a config's timing facts (the profiler's, and compare's first step): what it sets
# unless the command line says otherwise.
PROFILE_RUN = {"trainer.max_steps": "200", "trainer.stop_at_target": "false", "trainer.progress": "false"}


def profile_overrides(overrides: list[str]) -> list[str]:
    """``overrides`` with PROFILE_RUN's keys they do not set."""
    given = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    return [f"{k}={v}" for k, v in PROFILE_RUN.items() if k not in given] + list(overrides)


@dataclass
class Counts:
    """What a command line runs: ``jobs`` (every combination of its swept keys) and ``conditions`` (those of the
    keys but a tuning trial's), and for a sweep the folder its jobs go into (hydra.sweep.dir, resolved)."""

    jobs: int = 1
    conditions: int = 1
    sweep_dir: Optional[str] = None
    run_dir: Optional[str] = None  # one run's folder (hydra.run.dir, resolved)
    launcher: Optional[str] = None  # a sweep's hydra.launcher._target_, and its n_jobs where it has one
    n_jobs: Optional[int] = None


def compose_all(overrides: list[str], multirun: bool, config_name: str = "config",
                counts: Optional[Counts] = None) -> Iterable[DictConfig]:
    """Compose the config of every job the command line would run (past MAX_COMBINATIONS, see _combinations),
    filling ``counts`` (when given) with the jobs and conditions it runs. ConfigError for the first bad one."""
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(overrides)
    except OverrideParseException as e:
        raise _parse_error(e, overrides) from None
    app = [o for o in parsed if not o.is_hydra_override()]
    for o in app:
        _refuse_added_key(o)
    for o in app:  # OmegaConf would read 2 or "yes" as true: a boolean key takes true or false
        field = registry.schema_field(o.get_key_element())
        if (field is not None and field.metadata.get("check") is schema.boolean and not o.is_sweep_override()
                and str(o.value()).lower() not in ("true", "false")):
            raise ConfigError(o.get_key_element(), o.value(), field.metadata["allowed"])
    # hydra.searchpath among them finds a user's own config tree (their workloads and presets beside ours).
    hydra_args = [o.input_line for o in parsed if o.is_hydra_override()]
    refuse_unsafe_yaml(user_trees(parsed))
    logs = log_config.overridden([o.get_key_element() for o in parsed if o.is_hydra_override()])
    with initialize_config_module(version_base="1.3", config_module=CONFIG_MODULE):
        if not multirun:
            overrides = [o.input_line for o in app] + hydra_args
            if counts is not None or logs:
                with_hydra = _compose(config_name, overrides, hydra=True)
                if logs:
                    log_config.check_log_config(with_hydra)
                if counts is not None:
                    counts.run_dir = str(OmegaConf.select(with_hydra, "hydra.run.dir"))
            yield _compose(config_name, overrides)
            return
        sweeps = {o.get_key_element(): list(o.sweep_string_iterator()) for o in app if o.is_sweep_override()}
        set_here = [o for o in app if not o.is_sweep_override()]
        fixed, fixed_keys = [o.input_line for o in set_here], {o.get_key_element() for o in set_here}
        # Sweeps declared in a preset (hydra.sweeper.params), unless the command line sweeps or sets the same
        # key (Hydra's sweeper lets the command line win: `tuning.study=0` runs study 0 alone).
        first = _compose(config_name, fixed + [f"{k}={v[0]}" for k, v in sweeps.items()] + hydra_args, hydra=True)
        if logs:
            log_config.check_log_config(first)
        params = OmegaConf.select(first, "hydra.sweeper.params") or {}
        for key, spec in params.items():
            if key not in sweeps and key not in fixed_keys:
                ov = parser.parse_override(f"{key}={spec}")
                sweeps[key] = list(ov.sweep_string_iterator()) if ov.is_sweep_override() else [str(spec)]
        if counts is not None:
            counts.sweep_dir = str(OmegaConf.select(first, "hydra.sweep.dir"))
            counts.launcher = OmegaConf.select(first, "hydra.launcher._target_")
            counts.n_jobs = OmegaConf.select(first, "hydra.launcher.n_jobs")
            counts.jobs = math.prod(len(v) for v in sweeps.values())
            counts.conditions = math.prod(len(v) for k, v in sweeps.items() if k not in TRIAL_KEYS)
        composed = 0
        for cfg in _job_configs(sweeps, lambda combo: _compose(config_name, fixed + [f"{k}={v}" for k, v in combo]
                                                                + hydra_args), parser):
            composed += 1
            yield cfg
        if not composed:  # an empty sweep, e.g. tuning.trials=0: the values that emptied it are still checked
            yield first


# Free-form mappings a key may be added to with +: a user's workload's own options.
OPEN_SECTIONS = ("workload.options.",)


# The most of a user's config tree read before composing it (files, and bytes a file), far beyond a config tree.
TREE_FILES, TREE_BYTES = 2000, 1 << 20


def user_trees(parsed: list) -> list[Path]:
    """The folders of a user's own config tree that hydra.searchpath names (file://...)."""
    found = []
    for o in parsed:
        if o.is_hydra_override() and o.get_key_element() == "hydra.searchpath":
            values = o.value() if isinstance(o.value(), list) else [o.value()]
            found += [Path(str(v)[len("file://"):]) for v in values if str(v).startswith("file://")]
    return found


def refuse_unsafe_yaml(folders: list[Path]) -> None:
    """A user's config tree that OmegaConf can read safely: no YAML anchors or aliases (a few lines of them expand
    to gigabytes while composing, with no output: a run reached 7.5 GB in 11 minutes), no tags and no key twice in
    one mapping (each a traceback of OmegaConf's loader). Read as tokens and nodes, nothing expanded; ConfigError
    naming the file and line."""
    files = [p for folder in folders if folder.is_dir() for p in sorted(folder.rglob("*.yaml"))][:TREE_FILES]
    for path in files:
        try:
            text = path.read_bytes()[:TREE_BYTES].decode("utf-8", errors="replace")
            tokens = list(yaml.scan(text, Loader=yaml.SafeLoader))
        except (OSError, yaml.YAMLError):
            continue  # composing says what is wrong with it, in one line
        for token in tokens:
            if isinstance(token, (yaml.AnchorToken, yaml.AliasToken)):
                _refuse_yaml(path, token, f"a YAML {'anchor' if isinstance(token, yaml.AnchorToken) else 'alias'}",
                             "since a few lines of them expand to gigabytes while composing; write the values out")
            if isinstance(token, yaml.TagToken):
                _refuse_yaml(path, token, f"the YAML tag {token.value[0]}{token.value[1]}",
                             "OmegaConf reads plain values only; write the value without it")
        try:
            nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        except yaml.YAMLError:
            continue
        for node in nodes:
            _refuse_repeated_keys(path, node)


def _refuse_repeated_keys(path: Path, node) -> None:
    """The first key written twice in one mapping of ``node``'s tree (OmegaConf refuses it with a traceback)."""
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    _refuse_yaml(path, key, f"the key {key.value!r} a second time in one mapping",
                                 "write each key once")
                seen.add(key.value)
            _refuse_repeated_keys(path, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_repeated_keys(path, item)


def _refuse_yaml(path: Path, where, what: str, why: str) -> None:
    raise ConfigError("hydra.searchpath", str(path), "", (
        f"{path} uses {what} (line {where.start_mark.line + 1}): a user's config tree may not, {why}"))


def _refuse_added_key(override) -> None:
    """``+key=value`` adds a key Hydra would store and the run would ignore: refused unless the schema has it (a
    group, or a free-form mapping)."""
    if not (override.is_add() or override.is_force_add()):
        return
    key = override.key_or_group
    if override.package is not None or key.startswith(OPEN_SECTIONS) or registry.schema_field(key) is not None:
        return
    if "." not in key and key in ("workload", "echo", "storage", "tuning", "experiment"):
        return  # a config group
    raise ConfigError.unknown_key(key, registry.keys_of(key.rpartition(".")[0]))


def _job_configs(sweeps: dict[str, list[str]], make: Callable[[list[tuple[str, str]]], DictConfig],
                 parser: OverridesParser) -> Iterable[DictConfig]:
    """Every job's config, ``make`` composing one from its swept values. Composing is most of a sweep's plan
    (about half a second a job on 2 cores), and a tuning trial's config is its condition's with other values
    of tuning.study and tuning.trial alone: so each condition is composed at its first trial, each trial
    value once (which checks it, with Hydra's own error), and a condition's other trials are its config with
    those two keys set. Past MAX_COMBINATIONS jobs, every condition at its first trial and each trial value
    once; past MAX_COMBINATIONS conditions, each value once (every value is checked, and only the repeats
    among those composed are found: the others run)."""
    keys = list(sweeps)
    conditions, trials = [k for k in keys if k not in TRIAL_KEYS], [k for k in keys if k in TRIAL_KEYS]
    base = {k: v[0] for k, v in sweeps.items()}
    if math.prod(len(sweeps[k]) for k in conditions) > MAX_COMBINATIONS:
        yield make(list(base.items()))
        for k in keys:
            for v in sweeps[k][1:]:
                yield make(list({**base, k: v}.items()))
        return
    each_value = [make(list({**base, k: v}.items())) for k in trials for v in sweeps[k][1:]]
    every_trial = math.prod(len(v) for v in sweeps.values()) <= MAX_COMBINATIONS
    for values in itertools.product(*(sweeps[k] for k in conditions)):
        cfg = make(list({**base, **dict(zip(conditions, values))}.items()))
        yield cfg
        for trial in itertools.product(*(sweeps[k] for k in trials)) if every_trial else []:
            if list(trial) != [base[k] for k in trials]:
                yield _with_values(cfg, parser, dict(zip(trials, trial)))
    if not every_trial:  # not derived above: each trial's own config is checked (run_check.checked_config) instead
        yield from each_value


def _with_values(cfg: DictConfig, parser: OverridesParser, values: dict[str, str]) -> DictConfig:
    """A copy of ``cfg`` with ``values`` (key -> an override's value, parsed as Hydra parses it) set."""
    out = copy.deepcopy(cfg)
    for key, value in values.items():
        OmegaConf.update(out, key, parser.parse_override(f"{key}={value}").value(), merge=False)
    return out


def _compose(config_name: str, overrides: list[str], hydra: bool = False) -> DictConfig:
    try:
        return compose(config_name, overrides=overrides, return_hydra_config=hydra)
    except MissingConfigException as e:
        raise _missing_option(e, overrides) from None
    except ConfigCompositionException as e:
        raise _composition_error(e, overrides) from None
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", "") or ""
        raise ConfigError(key, None, "", f"{key}: {_first_line(str(e))}") from None


def _missing_option(e: MissingConfigException, overrides: list[str]) -> ConfigError:
    group, _, option = (e.missing_cfg_file or "").rpartition("/")
    options = ", ".join(sorted(e.options or []))
    if not group:
        return ConfigError("", None, "", _first_line(str(e)))
    hint = (" (one of your own? its config folder joins the search path: 'hydra.searchpath=[file://conf]')"
            if group in ("workload", "experiment") else "")
    return ConfigError(group, option, f"one of {options}{hint}")


def _composition_error(e: ConfigCompositionException, overrides: list[str]) -> ConfigError:
    # Hydra chains OmegaConf's error as the cause, or (merging a config file) only as the context.
    cause = e.__cause__ or e.__context__
    key = getattr(cause, "full_key", None)
    if not key:
        return ConfigError("", None, "", _first_line(str(e)))
    value = _override_value(key, overrides)
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        section = key.rpartition(".")[0]
        # The section's own type says what it holds (a user's workload has options, a built-in one does not).
        typed = getattr(cause, "object_type", None)
        known = [f.name for f in fields(typed)] if is_dataclass(typed) else _known_keys(section, overrides, key)
        error = ConfigError.unknown_key(key, known)
        where = re.match(r"In '([^']+)'", str(e))  # the config file that holds the key, when it is one
        return ConfigError(key, None, "", f"{error} (in {where.group(1)}.yaml)") if where else error
    allowed = registry.allowed_for(key) or _first_line(str(cause))
    return ConfigError(key, value, allowed)


def _known_keys(section: str, overrides: list[str], bad_key: str) -> list[str]:
    keys = registry.keys_of(section)
    if keys:
        return keys
    # A free-form mapping (workload.model, workload.augment): list what the composed config holds.
    rest = [o for o in overrides if _override_key(o) != bad_key]
    try:
        node = OmegaConf.select(compose("config", overrides=rest), section)
    except Exception:  # noqa: BLE001 - only used to enrich the message
        return []
    return list(node.keys()) if isinstance(node, DictConfig) else []


def _override_key(line: str) -> str:
    return line.split("=", 1)[0].lstrip("+~")


def _override_value(key: str, overrides: list[str]) -> Optional[str]:
    for line in overrides:
        if _override_key(line) == key and "=" in line:
            return line.split("=", 1)[1]
    return None


def _parse_error(e: OverrideParseException, overrides: list[str]) -> ConfigError:
    """The one line for the first override Hydra's grammar cannot parse, named (Hydra's own message does not
    say which), with what the grammar found wrong."""
    parser = OverridesParser.create()
    for line in overrides:
        try:
            parser.parse_overrides([line])
        except OverrideParseException as one:
            e = one
            break
    else:
        line = ""
    if not line.strip():
        return ConfigError("", line, "", f"an empty override ({line!r}): remove it (an empty argument, or a "
                           "space inside unquoted brackets, makes one; quote a list: 'key=[a, b]')")
    why = str(e).strip().splitlines()[0]
    return ConfigError(_override_key(line), None, "", f"cannot parse override '{line}' ({why}): write key=value, "
                       "sweeps as key=a,b,c (see https://hydra.cc/docs/advanced/override_grammar/basic)")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "invalid config"
