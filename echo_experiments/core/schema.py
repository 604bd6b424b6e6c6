"""How a config schema is written and checked, for the shared schema (config.py) and every task's
(workloads/*_schema.py): :class:`ConfigError` (the one-line error), the checks, :func:`setting` (a field
with its allowed-values sentence and check), and the walk that applies them to a composed config.

No TensorFlow or JAX here: the command line is checked before anything heavy loads.
"""

import math
import re
from dataclasses import field, fields, is_dataclass
from typing import Any, Callable, Iterator, Optional

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf


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
    if isinstance(value, str):  # quoted where bare it would read as something else, or split the one line
        return repr(value) if value == "" or " " in value or not value.isprintable() else value
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


def folder_name(v: Any) -> bool:
    """One folder's name, never a path (a workload name places its runs under runs/<name>)."""
    return text(v) and re.fullmatch(r"[A-Za-z0-9_.-]+", v) is not None and v not in (".", "..")


def has_port(address: str) -> bool:
    """host:port at the end of an address, the port in 1-65535."""
    port = address.rsplit(":", 1)[-1]
    return port.isdigit() and 1 <= int(port) <= 65535


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


def argument(name: str, value: Any, allowed: str, check: Check) -> Any:
    """A library function's argument, checked as the command line checks a key: ConfigError (a ValueError) naming
    the argument and what is allowed, in one line."""
    if not check(value):
        shown = repr(value) if isinstance(value, str) else show(value)  # a string where a number belongs, as given
        raise ConfigError(name, value, allowed, f"{name}={shown} is not allowed: {allowed}")
    return value


def setting(default: Any = MISSING, allowed: str = "", check: Optional[Check] = None, **kw: Any) -> Any:
    """A field with its allowed-values sentence and the check that enforces it."""
    meta = {"allowed": allowed, "check": check}
    if "default_factory" in kw:
        return field(default_factory=kw.pop("default_factory"), metadata=meta)
    return field(default=default, metadata=meta)



def field_at(schema: type, parts: list[str]):
    """The dataclass field at a path of names below ``schema``; None if there is none."""
    node, found = schema, None
    for part in parts:
        match = [f for f in fields(node) if f.name == part] if is_dataclass(node) else []
        if not match:
            return None
        found = match[0]
        node = found.type
    return found



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


def check_values(cfg: DictConfig) -> None:
    """Raise ConfigError for the first value its own field's check refuses (or a section's own rule)."""
    for error in _walk(cfg, ""):
        raise error

