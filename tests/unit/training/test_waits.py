"""What a run says it waits on, and the one line for an example a stage cannot take."""

import pytest
import tensorflow as tf
from conftest import compose_config

from echo_experiments.core.schema import ConfigError
from echo_experiments.core.specs import RunSpec
from echo_experiments.training.waits import Batches, input_source


def test_a_runs_own_data_is_named_by_its_folder_and_a_tfds_data_set_by_its_directory(tmp_path):
    def source(*overrides: str) -> str:
        return input_source(RunSpec.from_config(compose_config(*overrides)))
    assert source(f"workload.dataset=npz:{tmp_path}") == f"the input pipeline reading {tmp_path}"
    assert source() == "the input pipeline reading the TFDS data directory"
    assert source(f"data.dir={tmp_path}") == f"the input pipeline reading {tmp_path}"
    assert source("storage=http", "storage.url=http://127.0.0.1:9") == "the record server at http://127.0.0.1:9"


def test_an_example_a_stage_refuses_is_named_by_the_source_that_finds_it():
    class Source:
        name = "npz:/data"

        def fault(self):
            return "/data/train.npz example 3 is broken"
    for data, expected in [(Source(), "the input pipeline cannot take an example of npz:/data: /data/train.npz "
                                      "example 3 is broken"),
                           (None, "the input pipeline cannot take an example (")]:
        refusing = tf.data.Dataset.from_tensors(b"not an image").map(lambda b: {"image": tf.io.decode_image(b)})
        batches = Batches(iter(refusing), timeout_s=10, source="a test input", data=data)
        with pytest.raises(ConfigError) as error:
            batches.next()
        batches.close()
        assert str(error.value).startswith(expected), str(error.value)
