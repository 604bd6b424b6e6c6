"""A tf.data service for remote preprocessing: a dispatcher, and workers on as many CPU machines as needed.

    python -m echo_experiments.service dispatcher --port 5050
    python -m echo_experiments.service worker --dispatcher trainer-host:5050 --port 5051   # on each CPU host
    python -m echo_experiments data.service=grpc://trainer-host:5050 trainer.checkpoint_every_seconds=0

The trainer sends the pipeline's graph up to its echo point to the dispatcher; the workers run it (reading,
decoding, shuffling, and augmenting when the echo point is after augmentation) and stream the results
back, where the echo stage runs. Workers read the data set from the same ``data.dir`` path as the
trainer, so it must be on storage they can reach. The servers run until interrupted. A port in use, a port
out of range or a dispatcher that does not answer ends the command with one line and exit status 2.
"""

import argparse
import signal
import socket
import sys
import time
from typing import Optional

from echo_experiments.core.rundir import unwritable

# tf.data's servers take a port, not an address to bind: they listen on every interface, and take no
# authentication; the first line says so.
EVERY_INTERFACE = ("listening on every interface, unauthenticated: tf.data's servers cannot bind one address; "
                   "keep the port behind a firewall")


def port(text: str) -> int:
    """A TCP port for argparse: 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port: an integer from 0 (any free port) to 65535")
    return value


def seconds(text: str) -> float:
    """A wait for argparse: more than 0 seconds, at most an hour."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text} is not a wait: a number of seconds above 0, at most 3600")
    return value


def address(text: str) -> str:
    """HOST:PORT of a dispatcher for argparse, the port from 1 to 65535."""
    host, _, number = text.rpartition(":")
    if not host or not number.isdigit() or not 1 <= int(number) <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not HOST:PORT with a port from 1 to 65535")
    return text


def _port_problem(number: int) -> Optional[str]:
    """Why this machine cannot serve on ``number`` (None: it can). gRPC binds with SO_REUSEPORT, so a port another
    server holds looks free to it; a plain bind tells."""
    if number == 0:
        return None
    with socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET) as probe:
        try:
            probe.bind(("", number))
        except OSError as e:
            return f"port {number} cannot be served on ({e.strerror}): is another server on it? choose another --port"
    return None


def _unreachable(address: str, timeout_s: float) -> Optional[str]:
    """Why the dispatcher at ``address`` cannot be reached within ``timeout_s`` (None: it answered). It is asked
    again every half second: a worker may start before its dispatcher."""
    host, _, number = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, int(number)), timeout=max(0.1, deadline - time.monotonic())).close()
            return None
        except (OSError, ValueError) as e:
            if isinstance(e, ValueError) or time.monotonic() >= deadline:
                return (f"the dispatcher at {address} does not answer ({e}; waited {timeout_s:g} s): start it first "
                        "(python -m echo_experiments.service dispatcher --port PORT), or fix --dispatcher HOST:PORT")
            time.sleep(0.5)


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m echo_experiments.service", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    roles = parser.add_subparsers(dest="role", required=True)
    dispatcher = roles.add_parser("dispatcher",
                                  help="the dispatcher trainers connect to (data.service=grpc://HOST:PORT)")
    dispatcher.add_argument("--port", type=port, default=5050)
    dispatcher.add_argument("--work-dir", default=None,
                            help="where the dispatcher keeps its journal, so a restarted dispatcher keeps its jobs")
    worker = roles.add_parser("worker", help="a worker that runs the pipeline for the dispatcher")
    worker.add_argument("--dispatcher", type=address, required=True, help="HOST:PORT of the dispatcher")
    worker.add_argument("--port", type=port, default=0, help="0 = any free port")
    worker.add_argument("--timeout-s", type=seconds, default=30.0,
                        help="how long to wait for the dispatcher to answer (seconds, above 0, at most 3600)")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> None:
    args = parse(argv)
    problem = _port_problem(args.port)
    if problem is None and getattr(args, "work_dir", None) and (why := unwritable(args.work_dir)):
        problem = f"--work-dir {args.work_dir} cannot be used ({why}): choose a folder this user can write"
    if problem is None and args.role == "worker":
        problem = _unreachable(args.dispatcher, args.timeout_s)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    import tensorflow as tf

    service = tf.data.experimental.service
    # Blocked before the servers start their threads, so that only sigwait below receives these.
    stop_signals = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        if args.role == "dispatcher":
            server = service.DispatchServer(service.DispatcherConfig(
                port=args.port, work_dir=args.work_dir, fault_tolerant_mode=args.work_dir is not None))
            print(f"dispatcher at {server.target} ({EVERY_INTERFACE})", flush=True)
        else:
            server = service.WorkerServer(service.WorkerConfig(dispatcher_address=args.dispatcher, port=args.port))
            print(f"worker on port {args.port or 'any'} for dispatcher {args.dispatcher} ({EVERY_INTERFACE})",
                  flush=True)
    except RuntimeError as e:  # gRPC could not start the server
        print(f"error: the {args.role} could not start on port {args.port} ({str(e).splitlines()[0]}): choose "
              "another --port", file=sys.stderr)
        sys.exit(2)
    signal.sigwait(stop_signals)
    server.stop()


if __name__ == "__main__":
    main()
