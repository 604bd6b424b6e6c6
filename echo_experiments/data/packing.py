"""Pack documents of token ids into sequences of one fixed length, losing no token.

Documents are concatenated (each already ends in its end-of-document id) a group at a time; a group's
tokens fill sequences of ``length`` in order, and only its last sequence is padded, with ``weights`` 0 on
the padding. One reshape per group instead of one operation per token or per sequence.
"""

import tensorflow as tf


def pack(documents: tf.data.Dataset, length: int, group: int) -> tf.data.Dataset:
    """Sequences {"tokens": int32[length], "weights": int32[length]} from 1-D token-id documents."""

    def to_sequences(docs: tf.RaggedTensor) -> dict[str, tf.Tensor]:
        flat = docs.flat_values
        size = tf.size(flat)
        count = (size + length - 1) // length
        tokens = tf.pad(flat, [[0, count * length - size]])
        weights = tf.sequence_mask(size, count * length, dtype=tf.int32)
        return {"tokens": tf.reshape(tokens, [count, length]), "weights": tf.reshape(weights, [count, length])}

    return documents.ragged_batch(group).map(to_sequences).unbatch()
