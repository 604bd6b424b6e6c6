"""Text to token ids inside tf.data: bytes by default, a sentencepiece vocabulary as the option.

Each document becomes its ids followed by an end-of-document id, so packed sequences that span two
documents keep the boundary.
"""

import io
from pathlib import Path
from typing import Iterable

import numpy as np
import tensorflow as tf
from filelock import FileLock


class ByteTokenizer:
    """UTF-8 bytes 0-255 and an end-of-document id 256: nothing to train, nothing unknown."""

    vocab_size = 257
    eos_id = 256

    def encode(self, text: tf.Tensor) -> tf.Tensor:
        ids = tf.cast(tf.io.decode_raw(text, tf.uint8), tf.int32)
        return tf.concat([ids, [self.eos_id]], axis=0)

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(int(i) for i in ids if int(i) != self.eos_id).decode("utf-8", errors="replace")


class SentencePieceTokenizer:
    """A unigram sentencepiece vocabulary, trained once on the training documents and kept in the data
    directory next to the data set."""

    def __init__(self, model_path: Path, training_texts: Iterable[bytes], vocab_size: int):
        import sentencepiece as spm

        if not model_path.exists():
            model_path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(model_path.with_suffix(".lock")):
                if not model_path.exists():
                    model = io.BytesIO()
                    spm.SentencePieceTrainer.train(
                        sentence_iterator=(t.decode("utf-8", errors="replace") for t in training_texts),
                        model_writer=model, vocab_size=vocab_size, model_type="unigram", character_coverage=1.0,
                        # Text comes back exactly as it went in: no normalisation, spaces kept, and
                        # characters outside the vocabulary spelt as bytes.
                        normalization_rule_name="identity", remove_extra_whitespaces=False, byte_fallback=True,
                        pad_id=-1, bos_id=-1, eos_id=1, unk_id=0, max_sentence_length=1 << 20,
                        input_sentence_size=200_000, shuffle_input_sentence=True, minloglevel=2)
                    model_path.parent.mkdir(parents=True, exist_ok=True)
                    model_path.write_bytes(model.getvalue())
        self.processor = spm.SentencePieceProcessor(model_proto=model_path.read_bytes())
        self.vocab_size = self.processor.get_piece_size()
        self.eos_id = self.processor.eos_id()

    def encode(self, text: tf.Tensor) -> tf.Tensor:
        def ids(t) -> np.ndarray:
            return np.asarray(self.processor.encode(t.numpy().decode("utf-8", errors="replace")) + [self.eos_id],
                              np.int32)

        out = tf.py_function(ids, [text], Tout=tf.int32)
        out.set_shape([None])
        return out

    def decode(self, ids: Iterable[int]) -> str:
        return self.processor.decode([int(i) for i in ids if int(i) != self.eos_id])
