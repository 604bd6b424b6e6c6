"""Language modelling: a decoder-only Transformer on LM1B, C4 (the Common Crawl stand-in TFDS carries) or
the Python documentation (offline).

Pipeline recipe: documents (through the configured storage) are shuffled, tokenized and packed into
sequences of ``text.seq_len`` tokens; a packed sequence is the example, so read ids, fresh counts and echo
copies are per sequence. There is no augmentation, so the echo points are example echoing
(``before_batching``) and batch echoing (``after_batching``).
"""

from pathlib import Path
from typing import Any, Optional

import jax
import jax.numpy as jnp
import optax
import tensorflow as tf

from echo_experiments.config import ConfigError
from echo_experiments.data import sources
from echo_experiments.data.packing import pack
from echo_experiments.data.pipeline import Feed, Stages, padded, stage_seed, train_pipeline
from echo_experiments.data.tokenizers import ByteTokenizer, SentencePieceTokenizer
from echo_experiments.models import transformer
from echo_experiments.workloads.base import Workload

TEXT_KEYS = {"seq_len": 128, "tokenizer": "byte", "vocab_size": 8000, "pack_docs": 64, "doc_shuffle_buffer": 1024}


class LanguageModel(Workload):
    placements = ("none", "before_batching", "after_batching")

    @classmethod
    def check(cls, cfg: Any) -> None:
        for key in cfg.text:
            if key not in TEXT_KEYS:
                raise ConfigError.unknown_key(f"workload.text.{key}", list(TEXT_KEYS))
        text = {**TEXT_KEYS, **cfg.text}
        for key in ("seq_len", "vocab_size", "pack_docs", "doc_shuffle_buffer"):
            minimum = 8 if key == "seq_len" else 1
            if not (isinstance(text[key], int) and text[key] >= minimum):
                raise ConfigError(f"workload.text.{key}", text[key], f"an integer >= {minimum}")
        if text["tokenizer"] not in ("byte", "sentencepiece"):
            raise ConfigError("workload.text.tokenizer", text["tokenizer"], "one of byte, sentencepiece")
        if cfg.target.metric not in ("loss", "accuracy"):
            raise ConfigError("workload.target.metric", cfg.target.metric, "one of loss, accuracy")
        transformer.build(cfg.model, vocab_size=8, max_len=text["seq_len"])

    def __init__(self, cfg: Any, data_dir: Path):
        super().__init__(cfg, data_dir)
        self.check(cfg)
        text = {**TEXT_KEYS, **cfg.text}
        # Plain values: the stage functions are traced by tf.data and must not read the config object.
        self.seq_len, self.pack_docs = int(text["seq_len"]), int(text["pack_docs"])
        self.doc_shuffle_buffer = int(text["doc_shuffle_buffer"])
        self.train_source = sources.load(cfg.dataset, cfg.train_split, data_dir)
        self.eval_source = sources.load(cfg.dataset, cfg.eval_split, data_dir)
        self.tokenizer = self._tokenizer(text, data_dir)
        self.model = transformer.build(cfg.model, self.tokenizer.vocab_size, self.seq_len)
        self._eval_step = jax.jit(self._eval_sums)
        self._eval_batches = self._eval_dataset()

    def _tokenizer(self, text: dict[str, Any], data_dir: Path):
        if text["tokenizer"] == "byte":
            return ByteTokenizer()
        name = self.cfg.dataset.replace("/", "_")
        texts = (t for t in self.train_source.encoded(seed=0).map(lambda r: r["text"]).as_numpy_iterator())
        return SentencePieceTokenizer(Path(data_dir) / "echo_tokenizers" / f"{name}_spm{text['vocab_size']}.model",
                                      texts, int(text["vocab_size"]))

    # --- input pipeline -------------------------------------------------------------------------------

    def sequences(self, documents: tf.data.Dataset, seed: Optional[int]) -> tf.data.Dataset:
        """Packed sequences of one pass over ``documents`` (shuffled first unless ``seed`` is None)."""
        if seed is not None:
            documents = documents.shuffle(self.doc_shuffle_buffer, seed=stage_seed(seed, "documents"))
        tokens = documents.map(lambda r: self.tokenizer.encode(r["text"]), num_parallel_calls=tf.data.AUTOTUNE)
        return pack(tokens, self.seq_len, self.pack_docs)

    def train_batches(self, echo_cfg: Any, seed: int, feed: Feed = Feed()) -> tf.data.Dataset:
        records = self.train_source.encoded(seed) if feed.records is None else feed.records
        return train_pipeline(self.sequences(records, seed), Stages(decode=lambda x: x),
                              batch_size=self.cfg.batch_size, shuffle_buffer=self.cfg.shuffle_buffer,
                              echo_cfg=echo_cfg, seed=seed, host=feed.host, service=feed.service)

    def _eval_dataset(self) -> tf.data.Dataset:
        batches = self.sequences(self.eval_source.decoded(), seed=None)
        if self.cfg.eval_examples:
            batches = batches.take(self.cfg.eval_examples)
        # Held-out sequences are fixed once read: keep them for the next evaluation.
        return batches.cache().batch(self.cfg.eval_batch_size).prefetch(tf.data.AUTOTUNE)

    # --- model, loss, evaluation ----------------------------------------------------------------------

    def init(self, rng: jax.Array) -> tuple[Any, Any]:
        variables = self.model.init(rng, jnp.zeros((1, self.seq_len - 1), jnp.int32), train=False)
        return variables["params"], {}

    def _losses(self, params, tokens, train: bool, rng=None):
        logits = self.model.apply({"params": params}, tokens[:, :-1], train=train,
                                  rngs={"dropout": rng} if train else None).astype(jnp.float32)
        return logits, optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:])

    def loss(self, params, model_state, batch, rng):
        _, losses = self._losses(params, batch["tokens"], train=True, rng=rng)
        weights = batch["weights"][:, 1:].astype(jnp.float32)
        return jnp.sum(losses * weights) / jnp.maximum(jnp.sum(weights), 1.0), model_state

    def _eval_sums(self, params, model_state, batch):
        logits, losses = self._losses(params, batch["tokens"], train=False)
        weights = batch["weights"][:, 1:].astype(jnp.float32)
        correct = jnp.argmax(logits, -1) == batch["tokens"][:, 1:]
        return {"loss": jnp.sum(losses * weights), "correct": jnp.sum(correct * weights), "tokens": jnp.sum(weights)}

    def evaluate(self, params, model_state) -> dict[str, float]:
        totals = None
        for batch in padded(self._eval_batches, self.cfg.eval_batch_size):
            sums = self._eval_step(params, model_state, batch)
            totals = sums if totals is None else jax.tree.map(jnp.add, totals, sums)
        totals = jax.device_get(totals)
        tokens = float(totals["tokens"])
        loss = float(totals["loss"]) / tokens
        return {"loss": loss, "accuracy": float(totals["correct"]) / tokens, "perplexity": float(jnp.exp(loss))}

