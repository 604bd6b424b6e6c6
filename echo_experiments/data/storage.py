"""Slow storage, the way users meet it: training records read through a network hop or a remote store.

``storage.kind``:

- ``local``: the TFDS files on this machine (no added cost).
- ``http``: every record is fetched with an HTTP GET from a record server: the run starts one on loopback
  (``python -m echo_experiments.data.storage serve``, a separate process) unless ``storage.url`` names a
  running one. The server adds ``latency_ms`` per request and sends at most ``bandwidth_mb_s`` per
  request; the pipeline keeps ``parallel_reads`` requests in flight.
- ``emulated``: the same cost model without the network: each read waits latency + bytes / bandwidth.

The read cost stage sits right after the source, upstream of decoding and every echo point, so echoing
never pays it twice.
"""

import argparse
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.client import HTTPConnection, HTTPException
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Sequence
from urllib.parse import urlparse

import tensorflow as tf

from echo_experiments.core.schema import ConfigError
from echo_experiments.core.specs import StorageSpec

MB = 1e6


def read_cost_s(nbytes: int | float, latency_ms: float, bandwidth_mb_s: Optional[float]) -> float:
    """Seconds one request of ``nbytes`` takes: the latency plus the transfer at the given bandwidth."""
    transfer = nbytes / (bandwidth_mb_s * MB) if bandwidth_mb_s else 0.0
    return latency_ms / 1000 + transfer


# --- the record format on the wire ------------------------------------------------------------------------

def _example(serialized_tensors: dict[str, bytes]) -> bytes:
    """One record as a tf.train.Example of serialized tensors, so any feature dict round-trips."""
    feature = {k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v])) for k, v in serialized_tensors.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _parser(spec: dict[str, tf.TensorSpec]):
    features = {k: tf.io.FixedLenFeature([], tf.string) for k in spec}

    def parse(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        raw = tf.io.parse_single_example(serialized, features)
        out = {}
        for k, s in spec.items():
            value = tf.io.parse_tensor(raw[k], out_type=s.dtype)
            value.set_shape(s.shape)
            out[k] = value
        return out

    return parse


def _spec_json(spec: dict[str, tf.TensorSpec]) -> dict[str, Any]:
    return {k: {"dtype": s.dtype.name, "shape": s.shape.as_list()} for k, s in spec.items()}


def _spec_from_json(data: dict[str, Any]) -> dict[str, tf.TensorSpec]:
    return {k: tf.TensorSpec(v["shape"], tf.as_dtype(v["dtype"])) for k, v in data.items()}


# --- the record server ------------------------------------------------------------------------------------

class RecordServer(ThreadingHTTPServer):
    """Serves GET /meta (count and spec) and GET /record/<i>, each after the configured latency."""

    daemon_threads = True

    def __init__(self, address, records: list[bytes], spec: dict[str, Any], latency_ms: float,
                 bandwidth_mb_s: Optional[float]):
        super().__init__(address, _Handler)
        self.records, self.spec = records, spec
        self.latency_ms, self.bandwidth_mb_s = latency_ms, bandwidth_mb_s


class _Handler(BaseHTTPRequestHandler):
    server: RecordServer
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per reader thread

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        parts = self.path.strip("/").split("/")
        if parts == ["meta"]:
            body = json.dumps({"count": len(self.server.records), "spec": self.server.spec}).encode()
        elif (len(parts) == 2 and parts[0] == "record" and parts[1].isdigit()
              and int(parts[1]) < len(self.server.records)):
            body = self.server.records[int(parts[1])]
            time.sleep(read_cost_s(len(body), self.server.latency_ms, self.server.bandwidth_mb_s))
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # one line per request would drown the run's own output
        pass


def serve(dataset: str, split: str, data_dir: Optional[str], latency_ms: float, bandwidth_mb_s: Optional[float],
          port: int = 0) -> None:
    """Load a split's records and serve them until killed; prints the URL once ready."""
    from echo_experiments.data import sources

    source = sources.load(dataset, split, sources.data_dir(data_dir))
    ds = source.encoded(seed=0)
    spec = _spec_json(ds.element_spec)
    tensors = ds.map(lambda r: {k: tf.io.serialize_tensor(v) for k, v in r.items()})
    records = [_example(r) for r in tensors.as_numpy_iterator()]
    server = RecordServer(("127.0.0.1", port), records, spec, latency_ms, bandwidth_mb_s)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


class LoopbackServer:
    """A record server in a child process, for the length of a run."""

    def __init__(self, dataset: str, split: str, data_dir: str, latency_ms: float, bandwidth_mb_s: Optional[float]):
        args = [sys.executable, "-m", "echo_experiments.data.storage", "serve", dataset, split, data_dir,
                "--latency-ms", str(latency_ms)]
        if bandwidth_mb_s:
            args += ["--bandwidth-mb-s", str(bandwidth_mb_s)]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.close()
            raise RuntimeError(f"the record server did not start (exit status {self.process.returncode})")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


# --- the client side: records through a store ----------------------------------------------------------

def _meta(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/meta", timeout=10) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise ConfigError("storage.url", url, "", f"storage.url={url} is unreachable: {e}") from None


class _Fetcher:
    """Keeps one HTTP connection per reader thread."""

    def __init__(self, url: str):
        parsed = urlparse(url)
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.local = threading.local()

    def __call__(self, index) -> bytes:
        for attempt in range(3):
            conn = getattr(self.local, "conn", None) or HTTPConnection(self.host, self.port, timeout=60)
            self.local.conn = conn
            try:
                conn.request("GET", f"/record/{int(index)}")
                response = conn.getresponse()
                body = response.read()
                if response.status != 200:
                    raise OSError(f"record {int(index)}: HTTP {response.status}")
                return body
            # HTTPException: a server that died mid-response (IncompleteRead), retried like a lost connection.
            except (OSError, socket.timeout, HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def http_records(url: str, parallel_reads: int) -> tf.data.Dataset:
    """One epoch of records fetched from a record server, in its order, ``parallel_reads`` in flight."""
    meta = _meta(url)
    parse = _parser(_spec_from_json(meta["spec"]))
    fetch = _Fetcher(url)

    def get(index: tf.Tensor) -> tf.Tensor:
        serialized = tf.py_function(fetch, [index], Tout=tf.string)
        serialized.set_shape([])
        return parse(serialized)

    return tf.data.Dataset.range(meta["count"]).map(get, num_parallel_calls=parallel_reads, deterministic=True)


def latency_at(read: int, latency_ms: float, schedule: Optional[Sequence[Sequence[float]]]) -> float:
    """The latency of a process's ``read``-th read (from 0): ``latency_ms``, or with a schedule its spans of
    [reads, latency_ms] in turn, repeated."""
    if not schedule:
        return latency_ms
    position = read % sum(int(n) for n, _ in schedule)
    for n, ms in schedule:
        if position < n:
            return float(ms)
        position -= int(n)
    raise AssertionError("unreachable")


def emulated(records: tf.data.Dataset, latency_ms: float, bandwidth_mb_s: Optional[float],
             parallel_reads: int, schedule: Optional[Sequence[Sequence[float]]] = None) -> tf.data.Dataset:
    """Records that each take latency + bytes / bandwidth to read, ``parallel_reads`` at a time; with a
    ``schedule`` the latency follows it (:func:`latency_at`)."""
    reads = itertools.count()

    def wait(nbytes) -> bool:
        time.sleep(read_cost_s(float(nbytes), latency_at(next(reads), latency_ms, schedule), bandwidth_mb_s))
        return True

    def read(record: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        nbytes = tf.add_n([tf.cast(tf.strings.length(v), tf.int64) if v.dtype == tf.string
                           else tf.size(v, out_type=tf.int64) * v.dtype.size for v in record.values()])
        done = tf.py_function(wait, [nbytes], Tout=tf.bool)
        with tf.control_dependencies([done]):
            return {k: tf.identity(v) for k, v in record.items()}

    return records.map(read, num_parallel_calls=parallel_reads, deterministic=True)


class Store:
    """Training records read through the store ``storage`` names; close() ends a loopback server."""

    def __init__(self, storage: StorageSpec, source: Any):
        self.storage, self.source, self.server = storage, source, None
        if storage.kind == "http":
            if storage.url is None:
                self.server = LoopbackServer(source.name, source.split, source.data_dir,
                                             storage.latency_ms, storage.bandwidth_mb_s)
            self.url = storage.url or self.server.url
            _meta(self.url)  # an unreachable store fails here, before training

    @property
    def serves_examples(self) -> bool:
        """Whether a read fetches one of the workload's examples (``storage.read_unit=example``), not a record."""
        return self.storage.read_unit == "example"  # emulated only (core/rules.py)

    def records(self, seed: int) -> tf.data.Dataset:
        """One epoch of training records, through the store unless it serves examples (:meth:`examples`)."""
        kind = self.storage.kind
        if kind == "local" or self.serves_examples:
            return self.source.encoded(seed)
        if kind == "http":
            return self._threads(http_records(self.url, self.storage.parallel_reads))
        return self._emulated(self.source.encoded(seed))

    def examples(self, examples: tf.data.Dataset) -> tf.data.Dataset:
        """The workload's examples (made from :meth:`records`), each read through the store where it serves
        examples: a store of the language model's packed sequences rather than of its documents."""
        return self._emulated(examples) if self.serves_examples else examples

    def _emulated(self, items: tf.data.Dataset) -> tf.data.Dataset:
        st = self.storage
        return self._threads(emulated(items, st.latency_ms, st.bandwidth_mb_s, st.parallel_reads, st.latency_schedule))

    def _threads(self, items: tf.data.Dataset) -> tf.data.Dataset:
        # Reads mostly wait: each request in flight needs a thread of its own, beside the CPU-bound stages.
        options = tf.data.Options()
        options.threading.private_threadpool_size = self.storage.parallel_reads + (os.cpu_count() or 1)
        return items.with_options(options)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m echo_experiments.data.storage")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve a data set split's training records over HTTP")
    s.add_argument("dataset")
    s.add_argument("split")
    s.add_argument("data_dir", nargs="?", default="")
    s.add_argument("--latency-ms", type=float, default=0.0)
    s.add_argument("--bandwidth-mb-s", type=float, default=None)
    s.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    serve(args.dataset, args.split, args.data_dir or None, args.latency_ms, args.bandwidth_mb_s, args.port)


if __name__ == "__main__":
    main()
