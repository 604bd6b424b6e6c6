"""Where the echo stage goes, and the shuffle after it."""

from echo_experiments.core.placement import EchoSpec, Placement


def test_factor_one_has_no_echo_stage_and_no_echo_shuffle_whatever_the_placement():
    spec = EchoSpec(Placement.AFTER_BATCHING, 1.0, shuffle_buffer=64)
    assert spec.stage is Placement.NONE and spec.shuffle_size(32) == 0


def test_the_default_echo_shuffle_holds_ten_batches_of_copies_after_example_echoing_and_none_after_batching():
    assert EchoSpec(Placement.BEFORE_AUGMENTATION, 2.0).shuffle_size(64) == 10 * 2 * 64
    assert EchoSpec(Placement.BEFORE_BATCHING, 2.5).shuffle_size(32) == 10 * 3 * 32
    assert EchoSpec(Placement.AFTER_BATCHING, 4.0).shuffle_size(32) == 0
    assert EchoSpec(Placement.AFTER_BATCHING, 4.0, shuffle_buffer=16).shuffle_size(32) == 16
    assert EchoSpec(Placement.AFTER_AUGMENTATION, 2.0, shuffle_buffer=0).shuffle_size(32) == 0


def test_a_pipeline_without_augmentation_has_no_points_around_it():
    assert Placement.for_pipeline(augments=False) == (Placement.NONE, Placement.BEFORE_BATCHING,
                                                     Placement.AFTER_BATCHING)
    assert Placement.AFTER_AUGMENTATION.point == Placement.BEFORE_BATCHING.point == "E2"
    assert Placement.AFTER_BATCHING.echoes_batches and not Placement.BEFORE_BATCHING.echoes_batches
