"""What a command imports: TensorFlow without Keras (core/lean_imports.py), and keras still importable after it or
before it, for a user's own pipeline. Each in a fresh interpreter: the test process has imported TensorFlow."""

import subprocess
import sys

import pytest

AFTER = """
import sys
import echo_experiments.training.trainer  # TensorFlow, TensorBoard, JAX, Flax, Orbax: what a run imports
assert not [m for m in sys.modules if m.split(".")[0] in ("keras", "pandas", "matplotlib")], "Keras was imported"
assert "keras.src.optimizers" not in sys.modules  # the mark is gone
import keras
import tensorflow as tf
assert tf.keras.layers.Dense is keras.layers.Dense and "keras.src.optimizers" in sys.modules
"""
BEFORE = """
import echo_experiments
import keras  # before TensorFlow: Keras imports it itself
import tensorflow as tf
assert tf.keras.layers.Dense is keras.layers.Dense
"""


@pytest.mark.parametrize("script", [AFTER, BEFORE], ids=["keras after tensorflow", "keras before tensorflow"])
def test_a_command_imports_tensorflow_without_keras_and_keras_still_imports(script):
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
