"""A user's logging overrides (``hydra.job_logging``, ``hydra.hydra_logging``) checked before any job runs: Hydra
configures them as each job starts, and a handler it cannot make (a class that does not import, a file in a folder
that is not there, a level that is not one) was a traceback there, after the run's folder was made."""

import json
import os
import subprocess
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from echo_experiments.core.rundir import unwritable
from echo_experiments.core.schema import ConfigError

SECTIONS = ("job_logging", "hydra_logging")
# Configuring logging is the process's own state: it is tried in a child, which a user's handler class may not
# hold for ever.
TRY_TIMEOUT_S = 30
TRY = ("import json, logging.config, sys\n"
       "try:\n"
       "    logging.config.dictConfig(json.load(sys.stdin))\n"
       "except Exception as e:\n"
       "    cause = e.__cause__ or e.__context__\n"
       "    print(f'{e}' + (f' ({type(cause).__name__}: {cause})' if cause else ''), file=sys.stderr)\n"
       "    sys.exit(1)\n")


def overridden(keys: list[str]) -> bool:
    """Whether a command line's hydra keys change how a job logs."""
    return any(key.startswith(tuple(f"hydra{sep}{section}" for sep in "./" for section in SECTIONS)) for key in keys)


def check_log_config(cfg: DictConfig) -> None:
    """ConfigError naming the section for logging Hydra could not configure; ``cfg`` composed with its hydra keys.
    A log file's folder is checked where it is named outright (one under the run's folder is checked with it)."""
    for section in SECTIONS:
        node = OmegaConf.select(cfg, f"hydra.{section}")
        if node is None:
            continue
        config = OmegaConf.to_container(node, resolve=False)
        for name, handler in (config.get("handlers") or {}).items():
            filename = handler.get("filename") if isinstance(handler, dict) else None
            if isinstance(filename, str):
                key = f"hydra.{section}.handlers.{name}.filename"
                folder = Path(filename).absolute().parent
                why = (None if "${" in filename else unwritable(folder) if folder.is_dir()
                       else f"{folder} is not a folder: logging makes no folder")
                if why:
                    raise ConfigError(key, filename, "", f"{key}={filename} cannot be written ({why}): name a file in "
                                      "a folder this process can write, or leave the key out")
                handler["filename"] = os.devnull
        try:
            proc = subprocess.run([sys.executable, "-c", TRY], input=json.dumps(config, default=str),
                                  capture_output=True, text=True, timeout=TRY_TIMEOUT_S,
                                  env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        except subprocess.TimeoutExpired:
            raise ConfigError(f"hydra.{section}", None, "", (
                f"hydra.{section}: configuring it did not end within {TRY_TIMEOUT_S} s (a handler's class or "
                "its import waits): fix that handler or leave it out")) from None
        if proc.returncode:
            said = " ".join(proc.stderr.split()) or f"exit {proc.returncode}"
            raise ConfigError(f"hydra.{section}", None, "", (
                f"hydra.{section} cannot be configured: {said}: fix the handler, formatter or level it names"))
