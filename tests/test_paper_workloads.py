"""The paper's image workloads (ResNet-32 on CIFAR-10, ResNet-50 on ImageNet) on tfds.testing.mock_data."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_datasets as tfds
from conftest import compose_config

from echo_experiments.core.specs import PipelineSpec
from echo_experiments.data import stream
from echo_experiments.models import resnet
from echo_experiments.workloads import make
from echo_experiments.workloads.image_classification_schema import ResNetConfig


def n_params(module, shape):
    variables = jax.eval_shape(functools.partial(module.init, train=False), jax.random.PRNGKey(0), jnp.zeros(shape))
    return sum(int(np.prod(p.shape)) for p in jax.tree.leaves(variables["params"]))


def test_resnet50_has_the_published_parameter_count():
    # 25,557,032: ResNet-50 with a 1000-way classifier (He et al. 2016; torchvision's count).
    assert n_params(resnet.build(ResNetConfig(arch="resnet50"), 1000), (1, 224, 224, 3)) == 25_557_032


def test_resnet32_is_the_046M_cifar_network():
    # He et al. report 0.46M with zero-padding shortcuts; 1x1 projections at the two downsamplings add 2.6k.
    count = n_params(resnet.build(ResNetConfig(depth=32, width=16), 10), (1, 32, 32, 3))
    assert 460_000 <= count <= 467_000


def test_cifar10_pipeline_and_evaluation(tmp_path):
    cfg = compose_config("workload=resnet32", "echo=before_augmentation", "echo.shuffle_buffer=0",
                         "workload.batch_size=4", "workload.shuffle_buffer=16", "workload.eval_batch_size=4",
                         "workload.model.depth=8", f"data.dir={tmp_path}")
    with tfds.testing.mock_data(num_examples=12):
        workload = make(cfg.workload, tmp_path)
        batch = next(stream.build(workload, PipelineSpec.from_config(cfg)).as_numpy_iterator())
        params, state = jax.jit(workload.init)(jax.random.PRNGKey(0))
        metrics = workload.evaluate(params, state)
    assert batch["image"].shape == (4, 32, 32, 3) and batch["image"].dtype == np.uint8
    assert batch["read_id"].tolist()[0::2] == batch["read_id"].tolist()[1::2]  # e=2 copies, adjacent
    assert 0 <= metrics["accuracy"] <= 1 and np.isfinite(metrics["loss"])


def test_imagenet_pipeline_crops_to_224(tmp_path):
    cfg = compose_config("workload=resnet50", "workload.batch_size=2", "workload.eval_batch_size=2",
                         "workload.shuffle_buffer=8", f"data.dir={tmp_path}")
    with tfds.testing.mock_data(num_examples=4):
        workload = make(cfg.workload, tmp_path)
        train = next(stream.build(workload, PipelineSpec.from_config(cfg)).as_numpy_iterator())
        evaluation = next(workload.eval_batches.as_numpy_iterator())
    assert train["image"].shape == (2, 224, 224, 3) and train["image"].dtype == np.uint8
    assert evaluation["image"].shape == (2, 224, 224, 3)
    assert workload.num_classes == 1000


@pytest.mark.parametrize("workload_name", ["resnet32", "resnet50"])
def test_paper_workloads_keep_paper_settings(workload_name):
    cfg = compose_config(f"workload={workload_name}")
    expected_batch = {"resnet32": 128, "resnet50": 1024}[workload_name]
    assert cfg.workload.batch_size == expected_batch
    assert cfg.optimizer.nesterov and cfg.optimizer.schedule == "linear_decay"


# The paper-scale workloads on their offline stand-ins (data/sources.py, STAND_IN): what a user without ImageNet,
# LM1B or COCO is told to add. Small batches and held-out sets: a few steps and one evaluation each, end to end.
STAND_INS = [("resnet50", ["workload.dataset=synthetic_images", "workload.eval_split=test",
                           "workload.batch_size=4", "workload.eval_batch_size=64", "workload.shuffle_buffer=16",
                           "workload.augment.image_size=32"]),
             ("transformer_lm1b", ["workload.dataset=python_docs", "workload.eval_split=validation",
                                   "workload.batch_size=4", "workload.eval_batch_size=8", "workload.eval_examples=16"]),
             ("ssd_coco", ["workload.dataset=fashion_mnist_detection", "workload.eval_split=test",
                           "workload.batch_size=2", "workload.eval_batch_size=4", "workload.eval_examples=8",
                           "workload.shuffle_buffer=16"])]


@pytest.mark.slow
@pytest.mark.parametrize("workload, extra", STAND_INS, ids=[w for w, _ in STAND_INS])
def test_each_paper_scale_workload_trains_and_evaluates_on_its_stand_in(tmp_path, workload, extra):
    from conftest import train

    cfg = compose_config(f"workload={workload}", *extra, "trainer.max_steps=2", "trainer.profile_batches=0",
                         "trainer.eval_every_fresh_examples=4", "trainer.checkpoint_every_seconds=0")
    record = train(cfg, tmp_path)
    assert record.status == "not_reached" and record.steps == 2 and record.final_metrics
    assert all(np.isfinite(v) for v in record.final_metrics.values() if v is not None)
