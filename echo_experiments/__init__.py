"""echo_experiments: data echoing (Choi et al. 2019) experiments with Hydra, tf.data and JAX."""

import os

# TensorFlow only feeds the input pipeline; its C++ start-up chatter would bury the run's own output.
# oneDNN speeds TensorFlow's own convolutions and matmuls, which this package never runs (JAX does), and
# announces itself on stderr at import.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

# Keras, which TensorFlow imports eagerly and this package never uses, is left out of TensorFlow's import.
from echo_experiments.core import lean_imports  # noqa: E402 (after the environment TensorFlow reads)

lean_imports.install()
