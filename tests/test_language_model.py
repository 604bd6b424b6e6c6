"""The language-modelling workload on the real Python-docs corpus."""

from collections import Counter
from types import SimpleNamespace

import jax
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_each_read_delivered, compose_config, echoed_batches, train

from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.rundir import RunDir
from echo_experiments.data.packing import pack
from echo_experiments.data.tokenizers import ByteTokenizer, SentencePieceTokenizer
from echo_experiments.models.transformer import build
from echo_experiments.workloads import make
from echo_experiments.workloads.language_model_schema import TransformerConfig

N, B = 64, 8


@pytest.fixture(scope="module")
def workload(data_dir):
    return make(compose_config("workload=transformer_pydocs").workload, data_dir)


@pytest.fixture(scope="module")
def documents(workload):
    return [r["text"] for r in workload.train_source.encoded(seed=0).take(12).as_numpy_iterator()]


def test_bytes_round_trip(documents):
    tokenizer = ByteTokenizer()
    for text in [*documents[:3], "naïve café – ünïcode\n\tend".encode()]:
        ids = tokenizer.encode(tf.constant(text)).numpy()
        assert ids[-1] == tokenizer.eos_id and ids.max() <= 256
        assert tokenizer.decode(ids).encode() == text


def test_sentencepiece_round_trips_and_compresses(tmp_path, documents):
    tokenizer = SentencePieceTokenizer(tmp_path / "spm.model", documents, vocab_size=600)
    assert tokenizer.vocab_size == 600
    for text in [documents[0], documents[-1], "naïve café – ünïcode\n\n  spaced   out".encode()]:
        ids = tokenizer.encode(tf.constant(text)).numpy()
        assert ids[-1] == tokenizer.eos_id
        assert tokenizer.decode(ids) == text.decode()
    # 600 pieces, 256 of them byte fallbacks: still well under one id per byte.
    assert len(tokenizer.encode(tf.constant(documents[0])).numpy()) < 0.6 * len(documents[0])


def test_packing_loses_no_token(documents):
    tokenizer = ByteTokenizer()
    docs = tf.data.Dataset.from_tensor_slices(documents).map(tokenizer.encode)
    expected = np.concatenate([tokenizer.encode(tf.constant(d)).numpy() for d in documents])
    sequences = list(pack(docs, length=128, group=5).as_numpy_iterator())
    assert all(s["tokens"].shape == (128,) for s in sequences)
    kept = np.concatenate([s["tokens"][s["weights"] == 1] for s in sequences])
    np.testing.assert_array_equal(kept, expected)
    padded = [s for s in sequences if s["weights"].min() == 0]
    assert len(padded) <= 3  # only the last sequence of each group of 5 documents (12 documents: 3 groups)
    for s in padded:  # padding only at the end
        w = s["weights"]
        assert np.all(w[: w.sum()] == 1) and np.all(s["tokens"][w.sum():] == 0)


def batches(workload, placement, factor, batch_size=B, seed=0):
    """N packed sequences (the records are packed by the workload's examples hook inside the stream)."""
    documents = workload.train_source.encoded(seed)
    sequences = workload.sequences(documents, seed).take(N)
    identity = SimpleNamespace(examples=lambda records, seed: records, decode=workload.decode, augments=False)
    return echoed_batches(identity, sequences, placement, factor, batch_size=batch_size, shuffle_buffer=N, seed=seed)


@pytest.mark.parametrize("placement", ["before_batching", "after_batching"])
@pytest.mark.parametrize("factor", [1, 2, 3])
def test_exact_fresh_counts(workload, placement, factor):
    out = batches(workload, placement, factor)
    assert_each_read_delivered(out, N, factor)
    for b in out:
        assert b["tokens"].shape == (B, 128)


def test_example_echo_at_one_and_a_half(workload):
    out = batches(workload, "before_batching", 1.5, batch_size=1)
    copies = Counter(int(b["read_id"][0]) for b in out)
    assert len(copies) == N and set(copies.values()) == {1, 2} and len(out) == sum(copies.values())


def test_batch_echo_at_one_and_a_half(workload):
    out = batches(workload, "after_batching", 1.5)
    copies = Counter(tuple(b["read_id"]) for b in out)
    assert len(copies) == N // B and set(copies.values()) == {1, 2}
    assert sum(copies.values()) == len(out)


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_a_future_token_never_changes_an_earlier_position(positions):
    model = build(TransformerConfig(d_model=32, num_layers=2, num_heads=4, mlp_dim=64, dropout=0.0,
                                    positions=positions), vocab_size=50, max_len=16)
    tokens = jax.random.randint(jax.random.PRNGKey(0), (2, 16), 0, 50)
    params = model.init(jax.random.PRNGKey(1), tokens)
    before = model.apply(params, tokens)
    for j in (5, 15):
        changed = tokens.at[:, j].set((tokens[:, j] + 7) % 50)
        after = model.apply(params, changed)
        np.testing.assert_allclose(after[:, :j], before[:, :j], atol=1e-5)
        assert not np.allclose(after[:, j], before[:, j], atol=1e-5)


@pytest.mark.parametrize("placement", ["before_augmentation", "after_augmentation"])
def test_placements_without_a_stage_are_rejected(placement):
    assert check_command_line(["workload=transformer_pydocs", f"echo={placement}"]) == (
        f"echo.placement={placement} is not allowed: workload transformer_pydocs has no such stage; "
        "one of none, before_batching, after_batching")


def test_a_tiny_model_learns_real_text(tmp_path):
    summary = train(compose_config(
        "workload=transformer_pydocs", "workload.model.d_model=32", "workload.model.mlp_dim=64",
        "workload.text.seq_len=64", "workload.batch_size=16", "workload.eval_examples=128",
        "trainer.max_steps=240", "trainer.eval_every_fresh_examples=960", "trainer.profile_batches=0",
        "trainer.progress=false"), tmp_path).to_json()
    rows = list(RunDir(tmp_path).metrics())
    assert summary["status"] == "not_reached" and len(rows) == 4
    assert rows[-1]["loss"] < 0.85 * rows[0]["loss"]  # nats per byte on held-out documents
    assert rows[-1]["train_loss"] < rows[0]["train_loss"]
