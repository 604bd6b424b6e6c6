"""A failure in a user's own code (a workload of ``workload.task=module:Class``) in one line: the user's frame
and the message in full, not the library frames TensorFlow and JAX wrap them in."""

import re
import sysconfig
import traceback
from pathlib import Path
from typing import Optional

from echo_experiments.core.schema import ConfigError

PACKAGE = Path(__file__).resolve().parents[1]
# Where the installed libraries and the standard library live: a frame there is not the user's.
LIBRARIES = tuple({str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "platstdlib", "purelib",
                                                                               "platlib")})
# Where the docs say what each of a workload's hooks receives, for every kind of data.
HOOKS_DOC = "docs/your-model.md#what-each-hook-receives"
# The text TensorFlow's tracing puts around an error raised in a traced function.
IN_USER_CODE = "in user code:"


def frame(error: BaseException) -> Optional[traceback.FrameSummary]:
    """The innermost frame of ``error``'s traceback in the user's own code: outside this package, the installed
    libraries and the code tf.function generates."""
    for summary in reversed(traceback.extract_tb(error.__traceback__)):
        path = summary.filename
        if path.startswith("<") or "__autograph_generated" in path:
            continue
        resolved = str(Path(path).resolve())
        if not resolved.startswith(LIBRARIES) and not Path(resolved).is_relative_to(PACKAGE):
            return summary
    return None


def message(error: BaseException) -> str:
    """What went wrong, in full and on one line: where TensorFlow wrapped it ("in user code: ... TypeError: ..."),
    the error at the end of its text."""
    text = str(error).strip()
    if text.startswith(IN_USER_CODE):
        last = [line.strip() for line in text.splitlines() if line.strip()][-1]
        if re.match(r"\w+(Error|Exception|Warning)\b", last):
            return last
    text = " ".join(text.split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def failure(error: BaseException, what: str) -> Optional[str]:
    """The one line for ``error`` raised in the user's code while doing ``what`` (e.g. "FashionMLP.augment fails
    on its examples"), with the user's file, line and source; None where no frame of the traceback is the user's
    (a failure of this package or a library)."""
    where = frame(error)
    if where is None:
        return None
    source = f": {where.line.strip()}" if where.line else ""
    return f"{what}: {message(error)} (at {where.filename}:{where.lineno}, in {where.name}{source})"


def task_error(error: BaseException, task: str) -> Optional[ConfigError]:
    """The one line for ``error`` raised while running a user's workload (``workload.task=module:Class``) where
    it comes from the user's code; None for a built-in task or a failure of this package or a library."""
    line = failure(error, f"workload.task={task} fails") if ":" in task else None
    return ConfigError("workload.task", task, "", line) if line else None

