"""TensorFlow without Keras at its import. TensorFlow (2.16 and later) imports Keras eagerly while it imports
(``keras.src.optimizers``, to fill its SavedModel registry; it goes on without it if that import fails), and
Keras brings pandas and matplotlib with it: about a quarter of TensorFlow's import, paid by every command and by
each of a sweep's jobs. This package never uses Keras (JAX trains; tf.data only reads), so until TensorFlow has
imported, that one module is marked absent (None in ``sys.modules``, which the import system answers at once,
before importing its parents). Once TensorFlow is loaded, or where keras is imported before it, the mark goes and
keras imports as usual (``import keras``, ``tf.keras``), for a user's own pipeline too.

No TensorFlow here: the package's ``__init__`` installs the mark before anything imports TensorFlow.
"""

import importlib.abc
import sys

EAGER = "keras.src.optimizers"  # what TensorFlow's __init__ imports "to trigger registrations"
_ABSENT = object()


def _tensorflow_importing() -> bool:
    return bool(getattr(getattr(sys.modules.get("tensorflow"), "__spec__", None), "_initializing", False))


class ClearMarkAfterTensorFlow(importlib.abc.MetaPathFinder):
    """Finds nothing; at the first import after TensorFlow's (or at an import of keras before it), takes the mark
    away."""

    def find_spec(self, name, path=None, target=None):
        if sys.modules.get(EAGER, _ABSENT) is None and not _tensorflow_importing() and (
                "tensorflow" in sys.modules or name == "keras" or name.startswith("keras.")):
            del sys.modules[EAGER]
        return None


def install() -> None:
    """Mark Keras' eager module absent until TensorFlow has imported; nothing if either is already loaded."""
    if "tensorflow" in sys.modules or "keras" in sys.modules or EAGER in sys.modules:
        return
    sys.modules[EAGER] = None
    sys.meta_path.insert(0, ClearMarkAfterTensorFlow())
