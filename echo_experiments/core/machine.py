"""Which machine made a run: every summary.json names it, because results are bit-reproducible only on one
CPU model (XLA's CPU kernels and Eigen's blocking follow the processor, so the float sums of the same
config differ from one CPU model to another).

``cpu`` is what makes two machines comparable: the model name, family/model/stepping and the vector
features XLA can use. The reporter refuses to pool runs of different ``cpu`` in one condition unless asked.
"""

import functools
import importlib.metadata
import os
import platform
import socket
from pathlib import Path
from typing import Any, Optional

from echo_experiments.core.schema import ConfigError

# The instruction-set features that change what XLA's CPU compiler emits (vector width, FMA, bf16 units).
VECTOR_FEATURES = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
                   "avx512_fp16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_tile", "asimd", "sve")
PACKAGES = ("jax", "jaxlib", "tensorflow-cpu", "tensorflow", "numpy")
# A run during which other processes kept more than this many cores busy on average shared the machine: its
# seconds measured the other work too, and it is left out of the speedups (docs/protocol.md). A fifth of a core
# is far above the background of an idle machine and far below one more job (about 1). Measured on this
# project's 2-core machine with the sweeps paused: 0.002 by
#   python -c "import time; from echo_experiments.training.timing import *; w=OtherWork(); time.sleep(10);
#              print(w.seconds()/10)"
SHARED_CORES = 0.2


def short_cpu(cpu: str) -> str:
    """A describe()["cpu"] in a few words, its model name and family/model/stepping ("AMD EPYC 25/17/1"), for a
    sentence; the whole string elsewhere."""
    name, _, rest = cpu.partition(" (")
    ids = rest.split("family/model/stepping ", 1)[1].split(";")[0] if "family/model/stepping " in rest else ""
    return f"{name} {ids}".strip() if ids else cpu


def was_alone(other_cores: Optional[float]) -> bool:
    """Whether a run's seconds are a timing: it recorded what else ran meanwhile (other_cores), and that was
    at most SHARED_CORES. A run made before other_cores was recorded (None or NaN) is not known to have been
    alone (the sweeps of that time ran two jobs at a time), so its seconds do not count either."""
    return other_cores is not None and float(other_cores) <= SHARED_CORES  # NaN compares False



def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (Linux); empty elsewhere."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def describe() -> dict[str, Any]:
    """The machine, as summary.json records it (``host``, ``cpu``, ``cores``, ``versions``, ``xla_flags``)."""
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    model = info.get("model name") or platform.processor() or platform.machine()
    ids = "/".join(info.get(k, "?") for k in ("cpu family", "model", "stepping"))
    features = " ".join(f for f in VECTOR_FEATURES if f in flags) or "no vector flags"
    return {
        "host": socket.gethostname(),
        "cpu": f"{model} ({platform.machine()}, family/model/stepping {ids}; {features})",
        "cores": os.cpu_count(),
        "versions": {"python": platform.python_version(),
                     **{p: v for p in PACKAGES if (v := _version(p)) is not None}},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def check_resumed_on(started_on: str, run_dir: Path) -> None:
    """A run resumes only on the CPU model it started on (``started_on``; empty for a checkpoint saved before
    runs recorded it): resumed on another, its curve would join two machines' float sums under one record."""
    here = describe()["cpu"]
    if started_on and started_on != here:
        raise ConfigError("trainer.restart", False, "", (
            f"{run_dir} started on {started_on}, and this machine is {here}: a run resumed on another CPU model "
            "would mix two machines' numbers in one run; resume it on that model, or add trainer.restart=true to "
            "start it over here"))
