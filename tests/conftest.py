import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import echo_experiments.config  # noqa: E402,F401  (registers the schema with Hydra's ConfigStore)
from hydra import compose, initialize_config_module  # noqa: E402


def compose_config(*overrides: str):
    with initialize_config_module(version_base="1.3", config_module="echo_experiments.conf"):
        return compose("config", overrides=list(overrides))


@pytest.fixture(scope="session")
def data_dir():
    """The TFDS data directory the program itself uses (Fashion-MNIST is prepared there once)."""
    from echo_experiments.data import sources

    directory = sources.data_dir(None)
    sources.load("fashion_mnist", "train", directory)  # prepares it from the Debian files if needed
    return directory
