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
