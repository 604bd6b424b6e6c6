"""What the autopilot's copies hold: whole recent batches after batching; examples drawn from a pool as deep as a
fixed factor's echo shuffle, mixed across batches, never beside themselves, never past the cap."""

import collections

import numpy as np

from echo_experiments.autopilot.copies import ExampleCopies


def test_example_copies_are_drawn_from_the_pool_mixed_never_beside_themselves_and_never_past_the_cap():
    pool = ExampleCopies(max_factor=3.0, seed=0, depth=20)
    for i in range(2):
        pool.add({"read_id": np.arange(10) + 10 * i, "x": np.arange(10) + 10 * i})
    trained = collections.Counter(range(20))  # each fresh example once
    batches = []
    while (chosen := pool.candidate()) is not None:
        batch = pool.take(chosen, len(batches) + 1)
        assert len(batch["read_id"]) == 10 and len(set(batch["read_id"])) == 10  # no example beside itself
        assert (batch["x"] == batch["read_id"]).all()  # every key of an example taken together
        trained.update(batch["read_id"].tolist())
        batches.append(batch)
    # 40 copies in the pool, drawn while it holds its depth of 20: three batches, none past the cap of 3
    assert len(batches) == 3 and sum(trained.values()) == 50 and max(trained.values()) <= 3
    assert all(0 < (b["read_id"] < 10).sum() < 10 for b in batches)  # copies mix both batches


def test_no_copy_is_made_until_the_pool_holds_a_fixed_factors_echo_shuffle_of_copies():
    pool = ExampleCopies(max_factor=2.0, seed=0)  # one copy an example; depth 10 x 2 x 10 = 200 copies
    for i in range(19):
        pool.add({"read_id": np.arange(10) + 10 * i})
    assert pool.depth == 200 and pool.candidate() is None
    pool.add({"read_id": np.arange(10) + 190})
    assert pool.candidate() is not None


def _copy_gaps_at_the_inputs_pace(max_factor: float, batch_size: int, fresh: int) -> tuple[list[int], float]:
    """Steps between an example's fresh step and each of its copies, where the input is slow enough that the
    autopilot copies at every chance (a fresh batch, then copies while the pool allows), and the factor it
    echoed at."""
    pool, step, trained_at, gaps, copies = ExampleCopies(max_factor, seed=1), 0, {}, [], 0
    for i in range(fresh):
        ids = np.arange(batch_size) + batch_size * i
        pool.add({"read_id": ids})
        trained_at.update({int(k): step for k in ids})
        step += 1
        for _ in range(int(max_factor) - 1):
            if (chosen := pool.candidate()) is None:
                break
            copies += 1
            gaps += [step - trained_at[int(k)] for k in pool.take(chosen, copies)["read_id"]]
            step += 1
    return gaps, 1 + copies / fresh


def test_at_the_cap_its_copies_are_spread_at_least_as_far_as_a_fixed_factors_echo_shuffle_spreads_them():
    import tensorflow as tf

    from echo_experiments.core.placement import echo_shuffle_size
    from echo_experiments.data.echo import echo

    batch_size, fresh = 32, 400
    ds = echo(tf.data.Dataset.range(batch_size * fresh), 2.0, seed=0)
    ds = ds.shuffle(echo_shuffle_size(2.0, batch_size), seed=0).batch(batch_size)
    seen, fixed_gaps = {}, []
    for step, batch in enumerate(ds.as_numpy_iterator()):
        for k in batch.tolist():
            fixed_gaps += [step - seen[k]] if k in seen else []
            seen.setdefault(k, step)
    gaps, factor = _copy_gaps_at_the_inputs_pace(2.0, batch_size, fresh)
    # Drawn from the newest batches, every copy came a step after its fresh batch (the median gap was 1).
    assert np.median(gaps) >= np.median(fixed_gaps) >= 5
    assert factor >= 1.9  # and it still echoes at its cap: the pool's first fill costs 20 of 400 fresh batches


def test_what_an_example_copy_holds_follows_from_its_index_not_from_how_often_the_pool_was_asked():
    def pool():
        p = ExampleCopies(max_factor=4.0, seed=3, depth=1)
        for i in range(3):
            p.add({"read_id": np.arange(10) + 10 * i})
        return p
    asked_often, asked_once = pool(), pool()
    for _ in range(5):
        asked_often.candidate()  # the clock asks at every gap, and takes a fresh batch if it comes first
    first = asked_often.take(asked_often.candidate(), 1)["read_id"]
    assert (first == asked_once.take(asked_once.candidate(), 1)["read_id"]).all()
    assert not (first == pool().take(pool().candidate(), 2)["read_id"]).all()  # another index, another draw

