"""What the Workload base class decides from what a class has: augment_chunk where there is no augment."""

from conftest import compose_config

from echo_experiments.workloads import Workload


def unused(*args):
    raise AssertionError("not called here")


class Chunks(Workload):
    decode = init = loss = eval_examples = eval_outputs = eval_metrics = unused

    def augment_chunk(self, examples, seed):
        return examples


class Both(Chunks):
    def augment(self, example, seed):
        return example


def test_a_class_with_augment_chunk_and_no_augment_augments_in_chunks(data_dir):
    cfg = compose_config().workload
    assert Chunks(cfg, data_dir).augments_in_chunks
    assert not Both(cfg, data_dir).augments_in_chunks  # augment, unless the class says otherwise


def test_metrics_that_are_not_numbers_or_lack_the_targets_are_one_line(data_dir):
    import numpy as np
    import pytest

    from echo_experiments.core.schema import ConfigError

    workload = Both(compose_config().workload, data_dir)  # target: accuracy
    assert workload._checked({"accuracy": np.float32(0.5), "loss": 1}) == {"accuracy": 0.5, "loss": 1}
    with pytest.raises(ConfigError, match=r"^Both.eval_metrics returned accuracy \(str\): each metric must be a "):
        workload._checked({"accuracy": "0.5"})
    with pytest.raises(ConfigError, match=r"^workload.target.metric=accuracy is not among the metrics "
                                          r"Both.eval_metrics returns \(acc, loss\): the run could never reach"):
        workload._checked({"acc": 0.5, "loss": 1.0})
    with pytest.raises(ConfigError, match="must return a dict of metric names to numbers, not list"):
        workload._checked([0.5])
