"""The detection task's config schema (conf/workload/ssd_*.yaml start from it): its model, augmentation and
detection options, and what the task declares."""

from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, List

from echo_experiments.core.config import WorkloadConfig
from echo_experiments.core.schema import ConfigError, boolean, integer, nonempty_list, one_of, real, setting


@dataclass
class SSDConfig:
    arch: str = setting("ssd", "ssd", one_of("ssd"))
    stage_sizes: List[int] = setting(allowed="a list of integers >= 1 (blocks per stage)",
                                     check=nonempty_list(integer(1)), default_factory=lambda: [1, 1, 1, 1])
    width: int = setting(16, "an integer >= 1", integer(1))
    levels: int = setting(3, "an integer >= 1, at most the number of stages", integer(1))
    stem_stride: int = setting(2, "an integer >= 1", integer(1))

    @staticmethod
    def rules(node: Any, prefix: str) -> Iterator[ConfigError]:
        if node.levels > len(node.stage_sizes):
            yield ConfigError(f"{prefix}.levels", node.levels,
                              f"an integer from 1 to {len(node.stage_sizes)} (the stages)")


@dataclass
class DetectionAugmentConfig:
    random_crop: bool = setting(False, "true or false", boolean)
    flip: bool = setting(False, "true or false", boolean)
    photometric: bool = setting(False, "true or false", boolean)


@dataclass
class DetectionOptions:
    image_size: int = setting(300, "an integer >= 1", integer(1))
    max_boxes: int = setting(100, "an integer >= 1", integer(1))
    score_threshold: float = setting(0.05, "a real number in [0, 1)", real(0, 1, high_open=True))
    max_detections: int = setting(100, "an integer >= 1", integer(1))


@dataclass
class DetectionConfig(WorkloadConfig):
    metrics: ClassVar[tuple[str, ...]] = ("map", "map50")
    datasets: ClassVar[tuple[str, ...]] = ("fashion_mnist_detection", "coco/2017")
    augments: ClassVar[bool] = True

    augment: DetectionAugmentConfig = setting(allowed="augmentation options", default_factory=DetectionAugmentConfig)
    detection: DetectionOptions = setting(allowed="detection options", default_factory=DetectionOptions)
    model: SSDConfig = setting(allowed="model options", default_factory=SSDConfig)
