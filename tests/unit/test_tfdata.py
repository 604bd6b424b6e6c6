"""The echo stage in a user's own tf.data pipeline: exact fresh counts, every copy delivered, shuffled apart."""

import numpy as np
import pytest
import tensorflow as tf

from echo_experiments.tfdata import FreshCounter, echo, with_read_ids


def records(n=640):
    return tf.data.Dataset.from_tensor_slices({"x": np.arange(n, dtype=np.float32)})


@pytest.mark.parametrize("factor", [1.0, 2.0, 3.0])
def test_example_echoing_in_a_users_pipeline_counts_fresh_examples_exactly(factor):
    ds = echo(with_read_ids(records()).map(lambda e: {**e, "x": e["x"] * 2}), factor, shuffle_buffer=320).batch(32)
    fresh, delivered, ids = FreshCounter(), 0, []
    for batch in ds.as_numpy_iterator():
        fresh.update(batch["read_id"])
        delivered += len(batch["read_id"])
        ids += batch["read_id"].tolist()
        assert (batch["x"] == 2 * batch["read_id"]).all()  # each copy is its example
    assert fresh.count == 640 and delivered == 640 * factor
    assert sorted(set(ids)) == list(range(640)) and ids != sorted(ids)  # shuffled


def test_batch_echoing_repeats_whole_batches_and_a_second_epoch_reads_new_ids():
    ds = echo(with_read_ids(records(64).repeat(2)).batch(16), 2.0, batched=True)
    batches = list(ds.as_numpy_iterator())
    assert len(batches) == 16 and all((a["read_id"] == b["read_id"]).all() for a, b in zip(batches[::2], batches[1::2]))
    fresh = FreshCounter()
    for b in batches:
        fresh.update(b["read_id"])
    assert fresh.count == 128


def test_read_ids_after_repeat_count_a_second_epochs_reads_as_fresh():
    """Where the docs say they go: the stream of reads. Before repeat, a re-read keeps its first read's id."""
    def fresh(ds):
        counter = FreshCounter()
        for batch in echo(ds, 2.0).batch(10).as_numpy_iterator():
            counter.update(batch["read_id"])
        return counter.count

    assert fresh(with_read_ids(records(10).repeat(3))) == 30
    assert fresh(with_read_ids(records(10)).repeat(3)) == 10


def test_echo_needs_read_ids():
    with pytest.raises(ValueError, match="echo needs elements with a read_id"):
        echo(records(), 2.0)
    with pytest.raises(TypeError, match="a dataset of dicts"):
        with_read_ids(tf.data.Dataset.range(3))


def test_an_echoed_pipeline_is_saved_and_restored_exactly_by_tf_train_checkpoint_unless_a_python_stage_feeds_it(
        tmp_path):
    """docs/your-model.md's recipe: tf.train.Checkpoint(iterator=...) restores a pure-TensorFlow echoed pipeline
    mid-stream, the fractional factor's extra copies included; a tf.numpy_function stage upstream makes the iterator
    unsaveable (tf.data cannot save a Python function's state), an error at the save."""
    import tensorflow as tf

    from echo_experiments.tfdata import echo, with_read_ids

    def build(python_stage: bool):
        ds = with_read_ids(tf.data.Dataset.range(1000).map(lambda i: {"x": i}))
        if python_stage:
            ds = ds.map(lambda d: {**d, "x": tf.numpy_function(lambda v: v * 2, [d["x"]], tf.int64)})
        return echo(ds, 2.5, seed=1, shuffle_buffer=64).batch(8)

    iterator = iter(build(False))
    for _ in range(5):
        next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "saved"))
    expected = [next(iterator)["read_id"].numpy().tolist() for _ in range(3)]
    again = iter(build(False))
    tf.train.Checkpoint(iterator=again).restore(path)
    assert [next(again)["read_id"].numpy().tolist() for _ in range(3)] == expected
    python = iter(build(True))
    next(python)
    with pytest.raises(tf.errors.FailedPreconditionError, match="PyFunc is stateful"):
        tf.train.Checkpoint(iterator=python).save(str(tmp_path / "python"))


@pytest.mark.parametrize("kwargs, line", [
    ({"factor": 1e9}, "factor=1000000000 is not allowed: a real number >= 1 and <= 1000"),
    ({"factor": "2"}, "factor='2' is not allowed: a real number >= 1 and <= 1000"),
    ({"shuffle_buffer": -1}, "shuffle_buffer=-1 is not allowed: null or an integer >= 0 (elements)"),
    ({"batched": "yes"}, "batched='yes' is not allowed: true or false"),
])
def test_the_tfdata_stage_refuses_what_the_command_line_refuses_in_one_line(kwargs, line):
    import tensorflow as tf

    from echo_experiments.core.schema import ConfigError
    from echo_experiments.tfdata import echo, with_read_ids

    ds = with_read_ids(tf.data.Dataset.range(10).map(lambda i: {"x": i}))
    args = {"factor": 2.0, **kwargs}
    with pytest.raises(ConfigError) as refused:
        echo(ds, args.pop("factor"), **args)
    assert str(refused.value) == line
