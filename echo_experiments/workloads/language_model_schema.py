"""The language-model task's config schema (conf/workload/transformer_*.yaml start from it): its model and
text options, and what the task declares."""

from dataclasses import dataclass
from typing import Any, ClassVar, Iterator

from echo_experiments.core.config import WorkloadConfig
from echo_experiments.core.schema import ConfigError, boolean, integer, one_of, real, setting


@dataclass
class TransformerConfig:
    arch: str = setting("transformer", "transformer", one_of("transformer"))
    d_model: int = setting(512, "an integer >= 1", integer(1))
    num_layers: int = setting(6, "an integer >= 1", integer(1))
    num_heads: int = setting(8, "an integer >= 1 dividing d_model into an even head size", integer(1))
    mlp_dim: int = setting(2048, "an integer >= 1", integer(1))
    dropout: float = setting(0.1, "a real number in [0, 1)", real(0, 1, high_open=True))
    positions: str = setting("learned", "one of learned, rotary", one_of("learned", "rotary"))
    tie_embeddings: bool = setting(True, "true or false", boolean)

    @staticmethod
    def rules(node: Any, prefix: str) -> Iterator[ConfigError]:
        if node.d_model % node.num_heads or (node.d_model // node.num_heads) % 2:
            yield ConfigError(f"{prefix}.num_heads", node.num_heads,
                              f"a divisor of d_model={node.d_model} leaving an even head size")


@dataclass
class TextConfig:
    seq_len: int = setting(128, "an integer >= 8 (tokens per packed sequence)", integer(8))
    tokenizer: str = setting("byte", "one of byte, sentencepiece", one_of("byte", "sentencepiece"))
    vocab_size: int = setting(8000, "an integer >= 300 (sentencepiece; bytes have 257)", integer(300))
    pack_docs: int = setting(64, "an integer >= 1 (documents packed together)", integer(1))
    doc_shuffle_buffer: int = setting(1024, "an integer >= 1", integer(1))


@dataclass
class LanguageModelConfig(WorkloadConfig):
    metrics: ClassVar[tuple[str, ...]] = ("loss", "accuracy", "perplexity")

    text: TextConfig = setting(allowed="text options", default_factory=TextConfig)
    model: TransformerConfig = setting(allowed="model options", default_factory=TransformerConfig)
