"""A decoder-only Transformer language model in Flax: pre-norm blocks, causal self-attention, learned or
rotary positions, embeddings optionally tied to the output layer.

The paper's Transformer on LM1B and Common Crawl is the base size (d_model 512, 6 layers, 8 heads, MLP
2048); the CPU-scale workload uses a much smaller one.
"""

from typing import Any

import flax.linen as nn
import jax.numpy as jnp


def rotary(x: jnp.ndarray) -> jnp.ndarray:
    """Rotary position embedding (Su et al. 2021) over [batch, length, heads, head_dim]."""
    length, dim = x.shape[1], x.shape[-1]
    half = dim // 2
    freq = 1.0 / (10_000 ** (jnp.arange(half, dtype=jnp.float32) / half))
    angle = jnp.arange(length, dtype=jnp.float32)[:, None] * freq[None, :]
    cos, sin = jnp.cos(angle)[None, :, None, :], jnp.sin(angle)[None, :, None, :]
    a, b = x[..., :half], x[..., half:]
    return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1).astype(x.dtype)


class CausalSelfAttention(nn.Module):
    num_heads: int
    rotary: bool
    dropout: float

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool) -> jnp.ndarray:
        head_dim = x.shape[-1] // self.num_heads
        q, k, v = (nn.DenseGeneral((self.num_heads, head_dim), use_bias=False, name=name)(x)
                   for name in ("query", "key", "value"))
        if self.rotary:
            q, k = rotary(q), rotary(k)
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2], jnp.int32))
        y = nn.dot_product_attention(q, k, v, mask=mask, dropout_rate=self.dropout, deterministic=not train,
                                     dropout_rng=self.make_rng("dropout") if train and self.dropout else None)
        return nn.DenseGeneral(x.shape[-1], axis=(-2, -1), use_bias=False, name="out")(y)


class Block(nn.Module):
    num_heads: int
    mlp_dim: int
    rotary: bool
    dropout: float

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool) -> jnp.ndarray:
        drop = nn.Dropout(self.dropout, deterministic=not train)
        x = x + drop(CausalSelfAttention(self.num_heads, self.rotary, self.dropout)(nn.LayerNorm()(x), train))
        y = nn.Dense(x.shape[-1])(nn.gelu(nn.Dense(self.mlp_dim)(nn.LayerNorm()(x))))
        return x + drop(y)


class TransformerLM(nn.Module):
    vocab_size: int
    d_model: int = 512
    num_layers: int = 6
    num_heads: int = 8
    mlp_dim: int = 2048
    max_len: int = 256
    dropout: float = 0.1
    positions: str = "learned"
    tie_embeddings: bool = True

    @nn.compact
    def __call__(self, tokens: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        """Next-token logits [batch, length, vocab]; position t sees tokens 0..t only."""
        embed = nn.Embed(self.vocab_size, self.d_model, embedding_init=nn.initializers.normal(0.02))
        x = embed(tokens)
        if self.positions == "learned":
            table = self.param("positions", nn.initializers.normal(0.02), (self.max_len, self.d_model))
            x = x + table[None, : tokens.shape[1]]
        x = nn.Dropout(self.dropout, deterministic=not train)(x)
        for _ in range(self.num_layers):
            x = Block(self.num_heads, self.mlp_dim, self.positions == "rotary", self.dropout)(x, train)
        x = nn.LayerNorm()(x)
        return embed.attend(x) if self.tie_embeddings else nn.Dense(self.vocab_size, use_bias=False)(x)


def build(model_cfg: Any, vocab_size: int, max_len: int) -> TransformerLM:
    """The model a workload's ``model`` config (workloads/language_model_schema.py, validated) describes."""
    return TransformerLM(vocab_size=vocab_size, max_len=max_len, d_model=model_cfg.d_model,
                         num_layers=model_cfg.num_layers, num_heads=model_cfg.num_heads, mlp_dim=model_cfg.mlp_dim,
                         dropout=float(model_cfg.dropout), positions=model_cfg.positions,
                         tie_embeddings=bool(model_cfg.tie_embeddings))
