"""The image classification task's config schema (conf/workload/fashion_mnist.yaml, resnet32, resnet50 start
from it): its model and augmentation options, and what the task declares."""

from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Optional

from echo_experiments.core.config import WorkloadConfig
from echo_experiments.core.schema import ConfigError, boolean, integer, is_int, one_of, optional, real, setting

RESNET_DEPTHS = "6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110)"


@dataclass
class ResNetConfig:
    arch: str = setting("resnet_cifar", "one of resnet_cifar, resnet50", one_of("resnet_cifar", "resnet50"))
    depth: int = setting(32, RESNET_DEPTHS + "; resnet_cifar only", lambda v: is_int(v) and v >= 8 and (v - 2) % 6 == 0)
    width: Optional[int] = setting(None, "null (16 for resnet_cifar, 64 for resnet50) or an integer >= 1",
                                   optional(integer(1)))


@dataclass
class ImageAugmentConfig:
    crop_padding: int = setting(0, "an integer >= 0 (pad, then crop back at random; 0 = none)", integer(0))
    flip: bool = setting(False, "true or false", boolean)
    image_size: Optional[int] = setting(None, "null (the stored size) or an integer >= 8", optional(integer(8)))
    random_resized_crop: bool = setting(False, "true or false (needs image_size)", boolean)

    @staticmethod
    def rules(node: Any, prefix: str) -> Iterator[ConfigError]:
        if node.random_resized_crop and not node.image_size:
            yield ConfigError(f"{prefix}.random_resized_crop", True, f"false unless {prefix}.image_size is set")


@dataclass
class ImageClassificationConfig(WorkloadConfig):
    metrics: ClassVar[tuple[str, ...]] = ("accuracy", "loss")
    datasets: ClassVar[tuple[str, ...]] = ()  # any: TFDS's by name, or files (npz:, images:, tfrecord:)
    augments: ClassVar[bool] = True

    augment: ImageAugmentConfig = setting(allowed="augmentation options", default_factory=ImageAugmentConfig)
    model: ResNetConfig = setting(allowed="model options", default_factory=ResNetConfig)
    label_smoothing: float = setting(0.0, "a real number in [0, 1)", real(0, 1, high_open=True))
