"""Slow storage: records through a real loopback HTTP hop or an emulated store arrive intact and counted."""

import itertools
import subprocess
import sys

import numpy as np
import pytest
from conftest import FAST, compose_config, train

from echo_experiments.cli.plan import check_command_line
from echo_experiments.core.input_bound import xprof_class
from echo_experiments.core.rundir import RunDir
from echo_experiments.core.specs import PipelineSpec, StorageSpec
from echo_experiments.data import sources, stream
from echo_experiments.data.storage import LoopbackServer, Store, emulated, http_records, latency_at, read_cost_s
from echo_experiments.workloads import make


def test_read_cost_is_latency_plus_transfer():
    assert read_cost_s(0, 5.0, None) == pytest.approx(0.005)
    assert read_cost_s(2_000_000, 5.0, 10.0) == pytest.approx(0.005 + 0.2)
    assert read_cost_s(1000, 0.0, None) == 0.0


def _records(ds, n):
    return [{k: np.asarray(v) for k, v in r.items()} for r in ds.take(n).as_numpy_iterator()]


def test_records_arrive_unchanged_over_http(data_dir):
    source = sources.load("fashion_mnist", "test", data_dir)
    server = LoopbackServer("fashion_mnist", "test", str(data_dir), latency_ms=1.0, bandwidth_mb_s=None)
    try:
        remote = _records(http_records(server.url, parallel_reads=4), 40)
    finally:
        server.close()
    local = _records(source.encoded(seed=0), 40)
    assert len(remote) == len(local) == 40
    for a, b in zip(remote, local):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_emulated_store_keeps_records_and_order(data_dir):
    source = sources.load("fashion_mnist", "test", data_dir)
    slow = _records(emulated(source.encoded(seed=0), latency_ms=0.5, bandwidth_mb_s=50.0, parallel_reads=3), 30)
    fast = _records(source.encoded(seed=0), 30)
    assert all(np.array_equal(a["image"], b["image"]) and a["label"] == b["label"] for a, b in zip(slow, fast))


@pytest.mark.parametrize("read_unit", ["record", "example"])
def test_a_store_reads_what_its_read_unit_names_and_the_stream_stays_the_same(data_dir, monkeypatch, read_unit):
    """The language model's store of documents is read whole before its first batch (its document shuffle buffer
    holds more than the split), so only a store of its packed sequences paces its batches: one read each."""
    cfg = compose_config("workload=transformer_pydocs", "workload.shuffle_buffer=64", "storage=emulated",
                         "storage.latency_ms=0", "storage.parallel_reads=4", f"storage.read_unit={read_unit}")
    workload, spec = make(cfg.workload, data_dir), PipelineSpec.from_config(cfg)
    read = []  # the bytes of each read
    monkeypatch.setattr("echo_experiments.data.storage.read_cost_s",
                        lambda nbytes, latency_ms, bandwidth_mb_s: read.append(nbytes) or 0.0)
    with Store(StorageSpec.from_config(cfg.storage), workload.train_source) as store:
        slow = list(itertools.islice(stream.build(workload, spec, store=store).as_numpy_iterator(), 3))
    plain = list(itertools.islice(stream.build(workload, spec).as_numpy_iterator(), 3))
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(slow, plain, strict=True) for k in a)
    documents = [sum(len(v) for v in r.values()) for r in workload.train_source.encoded(seed=0).as_numpy_iterator()]
    if read_unit == "record":
        assert sorted(read) == sorted(documents)  # every document, before the first batch
    else:  # packed sequences, all of one size: the sequence shuffle's 64 and the 3 batches of 32 at least
        assert len(set(read)) == 1 and len(read) >= 64 + 3 * 32


@pytest.mark.parametrize("storage", ["storage=http", "storage=emulated"])
def test_training_through_slow_storage_counts_fresh_examples_exactly(tmp_path, storage):
    summary = train(compose_config(*FAST, storage, "storage.latency_ms=0.2", "storage.parallel_reads=4",
                                 "echo=before_augmentation", "echo.shuffle_buffer=0", "trainer.max_steps=20",
                                 "trainer.eval_every_fresh_examples=160", "workload.target.value=0.99",
                                 "workload.shuffle_buffer=256", "trainer.profile_batches=3"), tmp_path).to_json()
    assert summary["status"] == "not_reached" and summary["steps"] == 20
    assert summary["fresh_examples"] == 20 * 16  # e=2 before augmentation: 16 fresh per batch of 32
    assert [r["fresh_examples"] for r in RunDir(tmp_path).metrics()] == [160, 320]
    assert summary["upstream_s_per_batch"] > 0 and summary["downstream_s_per_step"] > 0
    assert summary["other_cores"] >= 0  # what else ran on the machine meanwhile (its test: test_profile)
    # What the steps and copies cost the input: seconds of training per fresh batch (of 32 fresh examples) between
    # two evaluations over the input's alone; none over the first interval, which holds the shuffle buffer's filling.
    first, second = RunDir(tmp_path).metrics()
    expected = (second["wall_time_s"] - first["wall_time_s"]) / (160 / 32) / summary["upstream_s_per_batch"]
    assert "input_slowdown" not in first and second["input_slowdown"] == pytest.approx(expected)
    assert summary["input_slowdown"] == pytest.approx(expected)  # the median of the one
    # The users' words beside R in the record: the share of step time waiting for input without echoing.
    share = max(0.0, 1 - 1 / summary["upstream_downstream_ratio"])
    assert summary["input_wait_share"] == pytest.approx(share) and summary["input_bound"] == xprof_class(share)


@pytest.mark.parametrize("argv,message", [
    (["storage=http", "storage.latency_ms=-1"],
     "storage.latency_ms=-1 is not allowed: a real number >= 0 (milliseconds per request)"),
    (["storage=emulated", "storage.bandwidth_mb_s=0"],
     "storage.bandwidth_mb_s=0 is not allowed: null (unlimited) or a real number > 0 (MB/s per request)"),
    (["storage=http", "storage.parallel_reads=0"],
     "storage.parallel_reads=0 is not allowed: an integer from 1 to 1024 (requests in flight, a thread each)"),
    (["storage=ftp"], "storage=ftp is not allowed: one of emulated, http, local"),
    (["storage=http", "storage.read_unit=example"],
     "storage.read_unit=example is not allowed: record unless storage.kind=emulated (only the emulated store serves "
     "the workload's examples)"),
    (["storage.read_unit=example"],
     "storage.read_unit=example is not allowed: record unless storage.kind=emulated (only the emulated store serves "
     "the workload's examples)"),
    (["storage=emulated", "storage.read_unit=sequence"],
     "storage.read_unit=sequence is not allowed: one of record, example (example: emulated only)"),
    (["storage=local", "storage.url=http://x"],
     "storage.url=http://x is not allowed: null, or with storage.kind=http a record server's http:// URL"),
])
def test_bad_storage_configs_give_one_line(argv, message):
    assert check_command_line(argv) == message


def test_an_unreachable_store_fails_with_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", *FAST, "storage=http",
                           "storage.url=http://127.0.0.1:9", f"hydra.run.dir={tmp_path}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: storage.url=http://127.0.0.1:9 is unreachable: ")
    assert not (tmp_path / "summary.json").exists()


def test_a_latency_schedule_takes_its_spans_in_turn_and_repeats():
    schedule = [[3, 10.0], [2, 1.0]]
    assert [latency_at(i, 5.0, schedule) for i in range(7)] == [10, 10, 10, 1, 1, 10, 10]
    assert latency_at(12345, 5.0, None) == 5.0
