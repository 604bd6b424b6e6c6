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
import numpy as np
import optax
import tensorflow as tf

from echo_experiments.data.packing import pack
from echo_experiments.data.stream import stage_seed
from echo_experiments.data.tokenizers import ByteTokenizer, SentencePieceTokenizer
from echo_experiments.models import transformer
from echo_experiments.workloads.base import Workload
from echo_experiments.workloads.language_model_schema import LanguageModelConfig


class LanguageModel(Workload):
    config_class = LanguageModelConfig

    def __init__(self, cfg: Any, data_dir: Path, compute_dtype: Any = jnp.float32):
        super().__init__(cfg, data_dir, compute_dtype)
        text = cfg.text
        # Plain values: the stage functions are traced by tf.data and must not read the config object.
        self.seq_len, self.pack_docs = int(text.seq_len), int(text.pack_docs)
        self.doc_shuffle_buffer = int(text.doc_shuffle_buffer)
        self.tokenizer = self._tokenizer(text, self.data_dir)
        self.model = transformer.build(cfg.model, self.tokenizer.vocab_size, self.seq_len)

    def _tokenizer(self, text: Any, data_dir: Path):
        if text.tokenizer == "byte":
            return ByteTokenizer()
        name = self.cfg.dataset.replace("/", "_")
        texts = (t for t in self.train_source.encoded(seed=0).map(lambda r: r["text"]).as_numpy_iterator())
        return SentencePieceTokenizer(Path(data_dir) / "echo_tokenizers" / f"{name}_spm{text.vocab_size}.model",
                                      texts, int(text.vocab_size))

    # --- input pipeline -------------------------------------------------------------------------------

    def sequences(self, documents: tf.data.Dataset, seed: Optional[int]) -> tf.data.Dataset:
        """Packed sequences of one pass over ``documents`` (shuffled first unless ``seed`` is None)."""
        if seed is not None:
            documents = documents.shuffle(self.doc_shuffle_buffer, seed=stage_seed(seed, "documents"))
        tokens = documents.map(lambda r: self.tokenizer.encode(r["text"]), num_parallel_calls=tf.data.AUTOTUNE)
        return pack(tokens, self.seq_len, self.pack_docs)

    def examples(self, records: tf.data.Dataset, seed: int) -> tf.data.Dataset:
        """A packed sequence is the example: read ids, fresh counts and echo copies are per sequence."""
        return self.sequences(records, seed)

    def decode(self, example):
        return example  # tokenizing and packing happened in examples()

    def eval_examples(self) -> tf.data.Dataset:
        return self.sequences(self.eval_source.decoded(), seed=None)

    @property
    def eval_count(self) -> Optional[int]:
        return self.cfg.eval_examples  # sequences, not documents: known only when the config caps them

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

    def eval_outputs(self, params, model_state, batch):
        logits, losses = self._losses(params, batch["tokens"], train=False)
        weights = batch["weights"][:, 1:].astype(jnp.float32)
        correct = jnp.argmax(logits, -1) == batch["tokens"][:, 1:]
        return {"loss": jnp.sum(losses * weights), "correct": jnp.sum(correct * weights), "tokens": jnp.sum(weights)}

    def eval_metrics(self, totals) -> dict[str, float]:
        totals = jax.device_get(totals)
        tokens = float(totals["tokens"])
        loss = float(totals["loss"]) / tokens
        return {"loss": loss, "accuracy": float(totals["correct"]) / tokens, "perplexity": float(np.exp(loss))}
