"""Every bad config value ends the program with one line naming the key and what is allowed."""

import subprocess
import sys

import pytest
from conftest import compose_config

from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.schema import ConfigError
from echo_experiments.workloads.registry import validate

# What echo.shuffle_buffer allows, as the error says it.
SHUFFLE_BUFFERS = ("null (the default: 10 x ceil(e) x batch examples after example echoing, none after batch "
                   "echoing) or an integer >= 0 (0 = no shuffle after the echo stage)")
CASES = [
    (["echo.factor=0"], "echo.factor=0 is not allowed: a real number >= 1"),
    (["echo.factor=0.5"], "echo.factor=0.5 is not allowed: a real number >= 1"),
    (["echo.factor=abc"], "echo.factor=abc is not allowed: a real number >= 1"),
    (["echo.factor=nan"], "echo.factor=nan is not allowed: a real number >= 1"),
    (["echo.placement=sideways"],
     "echo.placement=sideways is not allowed: one of none, before_augmentation, after_augmentation, "
     "before_batching, after_batching"),
    (["echo=sideways"],
     "echo=sideways is not allowed: one of after_augmentation, after_batching, before_augmentation, "
     "before_batching, default, none"),
    (["workload=imagenet"], "workload=imagenet is not allowed: one of fashion_mnist, resnet32, resnet50"),
    (["echo.placement=none", "echo.factor=2"],
     "echo.placement=none is not allowed: echo.factor=2 needs an echo point: one of before_augmentation, "
     "after_augmentation, before_batching, after_batching"),
    (["echo.shuffle_buffer=-1"], "echo.shuffle_buffer=-1 is not allowed: " + SHUFFLE_BUFFERS),
    (["echo.shuffle_buffer=1.5"], "echo.shuffle_buffer=1.5 is not allowed: " + SHUFFLE_BUFFERS),
    (["seed=-3"], "seed=-3 is not allowed: an integer in [0, 2147483647]"),
    (["seed=x"], "seed=x is not allowed: an integer in [0, 2147483647]"),
    (["trainer.max_steps=0"], "trainer.max_steps=0 is not allowed: null or an integer from 1 to 2147483647"),
    # Bounds that follow from what a key drives: int32 step counts, timing before training, threads, ports, a
    # folder's name.
    (["optimizer.decay_fresh_examples=3000000000"],
     "optimizer.decay_fresh_examples=3000000000 is not allowed: null (= trainer.max_fresh_examples) or an integer "
     "from 1 to 2147483647"),
    (["optimizer.warmup_fresh_examples=2147483648"], "optimizer.warmup_fresh_examples=2147483648 is not allowed: an "
                                                     "integer from 0 to 2147483647"),
    (["trainer.profile_batches=100000"], "trainer.profile_batches=100000 is not allowed: an integer from 0 to 1000"),
    (["storage.parallel_reads=1000000"], "storage.parallel_reads=1000000 is not allowed: an integer from 1 to 1024"),
    (["data.service=grpc://localhost:99999"], "data.service=grpc://localhost:99999 is not allowed: null or a tf.data "
                                              "service address grpc://host:port (port 1-65535)"),
    (["workload.name=../../elsewhere"], "workload.name=../../elsewhere is not allowed: a workload name: letters, "
                                        "digits, '_', '-' and '.' (it names a folder under runs/)"),
    (["trainer.num_processes=0"], "trainer.num_processes=0 is not allowed: null or an integer >= 1"),
    (["trainer.process_id=-1"], "trainer.process_id=-1 is not allowed: null or an integer >= 0"),
    (["trainer.distributed=true", "trainer.coordinator_address=localhost:1234", "trainer.num_processes=2",
      "trainer.process_id=2"],
     "trainer.process_id=2 is not allowed: an integer from 0 to 1 (one of the trainer.num_processes=2 processes)"),
    (["trainer.distributed=true", "trainer.coordinator_address=localhost:1234", "trainer.process_id=0"],
     "trainer.num_processes=null is not allowed: an integer >= 1 with trainer.coordinator_address"),
    (["trainer.distributed_timeout_s=0"], "trainer.distributed_timeout_s=0 is not allowed: an integer >= 1 (seconds)"),
    (["trainer.coordinator_address=''"],
     "trainer.coordinator_address='' is not allowed: null (found from SLURM, Open MPI or the TPU slice) or host:port "
     "of process 0"),
    (["trainer.eval_every_fresh_examples=0"],
     "trainer.eval_every_fresh_examples=0 is not allowed: an integer from 1 to 2147483647"),
    (["trainer.eval_every_fresh_examples=many"],
     "trainer.eval_every_fresh_examples=many is not allowed: an integer from 1 to 2147483647"),
    (["optimizer.learning_rate=-0.1"], "optimizer.learning_rate=-0.1 is not allowed: a real number > 0"),
    (["optimizer.momentum=1"], "optimizer.momentum=1 is not allowed: a real number in [0, 1)"),
    (["optimizer.schedule=cosine"],
     "optimizer.schedule=cosine is not allowed: one of constant, linear_decay, piecewise_exponential"),
    (["optimizer.decay_boundaries_fresh_examples=[300,200]"],
     "optimizer.decay_boundaries_fresh_examples=[300, 200] is not allowed: a list of increasing integers from 1 to "
     "2147483647 "
     "(fresh examples after the warmup)"),
    (["optimizer.warmup_steps=100", "optimizer.decay_fresh_examples=6400"],
     "optimizer.warmup_steps=100 is not allowed: null while optimizer.decay_fresh_examples is set: a schedule is in "
     "fresh examples or in steps, not both"),
    (["trainer.max_fresh_examples=null"],
     "trainer.max_fresh_examples=null is not allowed: an integer >= 1 unless trainer.max_steps is set (a run needs "
     "a budget)"),
    (["trainer.max_fresh_examples=null", "trainer.max_steps=100"],
     "optimizer.decay_fresh_examples=null is not allowed: an integer >= 1 unless trainer.max_fresh_examples is set "
     "(a linear decay needs a length)"),
    (["optimizer.decay_factor=0"], "optimizer.decay_factor=0 is not allowed: a real number in (0, 1]"),
    (["workload.batch_size=0"], "workload.batch_size=0 is not allowed: an integer >= 1"),
    (["workload.model.depth=9"],
     "workload.model.depth=9 is not allowed: 6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110)"),
    (["workload.model.arch=vgg"], "workload.model.arch=vgg is not allowed: one of resnet_cifar, resnet50"),
    (["echo.factr=2"], "echo.factr is not a key: echo has placement, factor, max_factor, cap, min_worth, replay, "
                       "shuffle_buffer"),
    (["workload.model.depht=20"], "workload.model.depht is not a key: workload.model has arch, depth, width"),
    (["echo.factor=1,,2"], "cannot parse override 'echo.factor=1,,2'"),
    # Hydra's parser does not say which override it could not parse: the line names it.
    (["echo.factor=2", "optimizer.decay_boundaries_fresh_examples=[1,2"],
     "cannot parse override 'optimizer.decay_boundaries_fresh_examples=[1,2' (no viable alternative at input "
     "'[1,2'): write key=value"),
    (["echo.factor=2", ""], "an empty override (''): remove it (an empty argument, or a space inside unquoted "
                            "brackets, makes one; quote a list: 'key=[a, b]')"),
    (["echo=none", "echo.factor=auto"], "echo.placement=none is not allowed: echo.factor=auto needs an echo point"),
    (["echo=after_batching", "echo.factor=2", "echo.replay=runs/a"], "echo.replay=runs/a is not allowed: null unless "
     "echo.factor=auto (only the autopilot's decisions are recorded)"),
    (["echo=after_batching", "echo.factor=auto", "echo.min_worth=0.5", "trainer.copy_worth_every=8"],
     "echo.min_worth=0.5 is not allowed: 0 while no copy-worth estimate is chosen (the pilots chose none: "
     "docs/protocol.md), so nothing could gate the autopilot's copies"),
    (["echo=after_batching", "echo.factor=2", "echo.min_worth=0.2"], "echo.min_worth=0.2 is not allowed: 0 while no"),
    (["echo=after_batching", "echo.factor=auto", "echo.min_worth=2"], "echo.min_worth=2 is not allowed: 0 while no "
     "copy-worth estimate is chosen"),
    (["echo=after_batching", "echo.factor=auto", "echo.max_factor=0.5"], "echo.max_factor=0.5 is not allowed: a real "
     "number >= 1 and <= 1000 (the cap of echo.factor=auto)"),
    (["storage=emulated", "storage.latency_schedule=[[0,2]]"], "storage.latency_schedule=[[0, 2]] is not allowed: null "
     "or a list of [reads, latency_ms] pairs"),
    (["storage.latency_schedule=[[10,2]]"], "storage.latency_schedule=[[10, 2]] is not allowed: null unless "
     "storage.kind=emulated"),
    # Values that were accepted and then crashed mid-run, or were read as something else.
    (["echo.factor=1e9"], "echo.factor=1000000000 is not allowed: a real number >= 1 and <= 1000, or auto"),
    (["echo.shuffle_buffer=9223372036854775807"], "echo.shuffle_buffer=9223372036854775807 is not allowed: null"),
    (["workload.shuffle_buffer=99999999999"], "workload.shuffle_buffer=99999999999 is not allowed: an integer >= 1"),
    (["workload.batch_size=100000000"], "workload.batch_size=100000000 is not allowed: an integer >= 1 and <= 65536"),
    (["workload.eval_batch_size=100000000"],
     "workload.eval_batch_size=100000000 is not allowed: an integer >= 1 and <= 65536"),
    (["seed=99999999999999999999"], "seed=99999999999999999999 is not allowed: an integer in [0, 2147483647]"),
    (["workload.target.value=nan"], "workload.target.value=nan is not allowed: a real number"),
    (["trainer.stop_at_target=2"], "trainer.stop_at_target=2 is not allowed: true or false"),
    (["trainer.tensorboard=yes"], "trainer.tensorboard=yes is not allowed: true or false"),
    (["trainer.restart=1"], "trainer.restart=1 is not allowed: true or false"),
    (["echo.cap=sometimes"], "echo.cap=sometimes is not allowed: one of fixed, trend, paired (with echo.factor=auto"),
    (["echo.cap=trend"], "echo.cap=trend is not allowed: fixed unless echo.factor=auto"),
    # Data directories: a mistyped one is refused, never created.
    (["data.dir=/nonexistent/tfds"], "data.dir=/nonexistent/tfds is not allowed: null ($TFDS_DATA_DIR, else "
                                     "~/tensorflow_datasets) or an existing folder"),
    (["data.dir=/dev/null"], "data.dir=/dev/null is not allowed: null ($TFDS_DATA_DIR, else ~/tensorflow_datasets) "
                             "or an existing folder"),
]


@pytest.mark.parametrize("overrides,message", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_value_gives_one_line_naming_key_and_allowed_values(overrides, message):
    error = check_command_line(overrides)
    assert error is not None and error.startswith(message)
    assert "\n" not in error


def test_every_job_of_a_sweep_is_checked_before_any_runs():
    assert check_command_line(["-m", "echo.factor=1,2,4"]) is None
    assert check_command_line(["-m", "echo=after_batching", "echo.factor=1,2,auto", "storage=emulated",
                               "storage.latency_schedule=[[25600,20],[25600,1]]"]) is None
    assert check_command_line(["-m", "echo.factor=2,0.5"]) == (
        "echo.factor=0.5 is not allowed: a real number >= 1 and <= 1000, or auto")
    assert check_command_line(["-m", "workload=fashion_mnist,nope"]).startswith("workload=nope is not allowed")


def test_good_command_lines_pass():
    for argv in (["echo.factor=4"], ["workload=resnet50", "echo.factor=4"], ["echo=after_batching", "echo.factor=1.5"],
                 ["echo=none"], ["--cfg", "job"]):
        assert check_command_line(argv) is None, argv


def test_a_placement_the_workload_has_no_stage_for():
    cfg = compose_config("workload=transformer_pydocs", "echo=before_augmentation")
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert str(e.value) == ("echo.placement=before_augmentation is not allowed: workload transformer_pydocs has no "
                            "such stage; one of none, before_batching, after_batching")


def test_the_program_exits_non_zero_with_one_line_and_no_traceback(tmp_path):
    for argv, message in [(["echo.factor=0"], "echo.factor=0 is not allowed"),
                          (["workload=nope"], "workload=nope is not allowed")]:
        proc = subprocess.run([sys.executable, "-m", "echo_experiments", *argv, f"hydra.run.dir={tmp_path}"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [f"error: {check_command_line(argv)}"]
        assert message in proc.stderr and "Traceback" not in proc.stderr


def test_a_yaml_alias_bomb_in_a_users_config_tree_is_refused_in_one_line_before_composing(tmp_path):
    """Nine lines of anchors and aliases expand to a billion strings: composing them blocked with no output while
    memory grew. The tree is read as tokens first, and an anchor or alias is one line naming the file."""
    from echo_experiments.cli.plan import check_command_line

    (tmp_path / "workload").mkdir()
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]"
              for p, n in zip("abcdefgh", "bcdefghi")]
    (tmp_path / "workload" / "bomb.yaml").write_text("\n".join(lines) + "\n")
    line = check_command_line([f"hydra.searchpath=[file://{tmp_path}]", "workload=bomb"])
    assert line == (f"{tmp_path / 'workload' / 'bomb.yaml'} uses a YAML anchor (line 1): a user's config tree may "
                    "not, since a few lines of them expand to gigabytes while composing; write the values out")


@pytest.mark.parametrize("text, said", [
    ("name: mine\nbatch_size: !!python/object:os.system 1\n",
     "uses the YAML tag !!python/object:os.system (line 2): a user's config tree may not, OmegaConf reads plain "
     "values only; write the value without it"),
    ("name: mine\noptions:\n  width: 3\n  width: 4\n",
     "uses the key 'width' a second time in one mapping (line 4): a user's config tree may not, write each key once"),
])
def test_a_yaml_tag_or_a_key_written_twice_in_a_users_config_tree_is_one_line_naming_the_file(tmp_path, text, said):
    """Each was a traceback of 84-94 lines from OmegaConf's loader."""
    from echo_experiments.cli.plan import check_command_line

    (tmp_path / "workload").mkdir()
    (tmp_path / "workload" / "mine.yaml").write_text(text)
    line = check_command_line([f"hydra.searchpath=[file://{tmp_path}]", "workload=mine"])
    assert line == f"{tmp_path / 'workload' / 'mine.yaml'} {said}"


@pytest.mark.parametrize("source, line", [
    ("def broken(:\n", "importing userbad raised SyntaxError at {path}:1: invalid syntax"),
    ("import sys\nsys.exit(7)\n", "importing userbad raised SystemExit at {path}:2: 7"),
    ("x = 1 / 0\n", "importing userbad raised ZeroDivisionError at {path}:1: division by zero"),
])
def test_a_users_module_that_fails_as_it_is_imported_is_one_line_naming_its_file_and_line(tmp_path, monkeypatch,
                                                                                           source, line):
    from echo_experiments.cli.plan import check_command_line

    (tmp_path / "userbad.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    said = check_command_line(["workload.task=userbad:Task"])
    assert said == "workload.task=userbad:Task: " + line.format(path=tmp_path / "userbad.py")


def test_a_users_module_that_blocks_as_it_is_imported_is_one_line_within_the_bound(tmp_path, monkeypatch):
    from echo_experiments.cli.plan import check_command_line
    from echo_experiments.workloads import registry

    (tmp_path / "userslow.py").write_text("import time\ntime.sleep(30)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "IMPORT_TIMEOUT_S", 0.5)
    assert check_command_line(["workload.task=userslow:Task"]) == (
        "workload.task=userslow:Task: importing userslow did not finish within 0.5 s: does it wait on something as "
        "it is imported (a lock, the network, input)?")
