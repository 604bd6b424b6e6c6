"""ResNets in Flax: the CIFAR family (He et al. 2016, depth 6n+2: ResNet-20, -32, ...) and ResNet-50.

Inputs are float images already normalised by the workload. The last batch norm of every residual branch
starts at zero (Goyal et al. 2017), so each block starts as the identity.
"""

from functools import partial
from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp


class BasicBlock(nn.Module):
    filters: int
    strides: int = 1

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool) -> jnp.ndarray:
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5)
        y = nn.Conv(self.filters, (3, 3), self.strides, use_bias=False)(x)
        y = nn.relu(norm()(y))
        y = nn.Conv(self.filters, (3, 3), use_bias=False)(y)
        y = norm(scale_init=nn.initializers.zeros)(y)
        if x.shape != y.shape:
            x = norm()(nn.Conv(self.filters, (1, 1), self.strides, use_bias=False)(x))
        return nn.relu(x + y)


class BottleneckBlock(nn.Module):
    filters: int
    strides: int = 1

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool) -> jnp.ndarray:
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5)
        y = nn.relu(norm()(nn.Conv(self.filters, (1, 1), use_bias=False)(x)))
        y = nn.relu(norm()(nn.Conv(self.filters, (3, 3), self.strides, use_bias=False)(y)))
        y = norm(scale_init=nn.initializers.zeros)(nn.Conv(4 * self.filters, (1, 1), use_bias=False)(y))
        if x.shape != y.shape:
            x = norm()(nn.Conv(4 * self.filters, (1, 1), self.strides, use_bias=False)(x))
        return nn.relu(x + y)


class CifarResNet(nn.Module):
    """Three stages of n basic blocks at width, 2x width, 4x width: depth 6n + 2."""

    depth: int
    num_classes: int
    width: int = 16

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        n = (self.depth - 2) // 6
        x = nn.Conv(self.width, (3, 3), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)(x))
        for stage in range(3):
            for block in range(n):
                strides = 2 if stage > 0 and block == 0 else 1
                x = BasicBlock(self.width * 2**stage, strides)(x, train)
        return nn.Dense(self.num_classes)(jnp.mean(x, axis=(1, 2)))


class ImageNetResNet(nn.Module):
    """ResNet-50 (v1.5: the stride sits in the 3x3 convolution)."""

    num_classes: int
    stage_sizes: Sequence[int] = (3, 4, 6, 3)
    width: int = 64

    @nn.compact
    def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
        x = nn.Conv(self.width, (7, 7), (2, 2), padding=[(3, 3), (3, 3)], use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)(x))
        x = nn.max_pool(x, (3, 3), (2, 2), padding="SAME")
        for stage, blocks in enumerate(self.stage_sizes):
            for block in range(blocks):
                strides = 2 if stage > 0 and block == 0 else 1
                x = BottleneckBlock(self.width * 2**stage, strides)(x, train)
        return nn.Dense(self.num_classes)(jnp.mean(x, axis=(1, 2)))


def build(model_cfg: Any, num_classes: int) -> nn.Module:
    """The model a workload's ``model`` config (workloads/image_classification_schema.py, validated) describes."""
    if model_cfg.arch == "resnet_cifar":
        return CifarResNet(depth=model_cfg.depth, width=model_cfg.width or 16, num_classes=num_classes)
    return ImageNetResNet(num_classes=num_classes, width=model_cfg.width or 64)
