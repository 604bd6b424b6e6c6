"""A tf.data service for remote preprocessing: a dispatcher, and workers on as many CPU machines as needed.

    python -m echo_experiments.service dispatcher --port 5050
    python -m echo_experiments.service worker --dispatcher trainer-host:5050 --port 5051   # on each CPU host
    python -m echo_experiments data.service=grpc://trainer-host:5050 trainer.checkpoint_every_seconds=0

The trainer sends the pipeline's graph up to its echo point to the dispatcher; the workers run it (reading,
decoding, shuffling, and augmenting when the echo point is after augmentation) and stream the results
back, where the echo stage runs. Workers read the data set from the same ``data.dir`` path as the
trainer, so it must be on storage they can reach. The servers run until interrupted.
"""

import argparse
import signal

import tensorflow as tf


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m echo_experiments.service", description=__doc__.split("\n")[0])
    roles = parser.add_subparsers(dest="role", required=True)
    dispatcher = roles.add_parser("dispatcher",
                                  help="the dispatcher trainers connect to (data.service=grpc://HOST:PORT)")
    dispatcher.add_argument("--port", type=int, default=5050)
    dispatcher.add_argument("--work-dir", default=None,
                            help="where the dispatcher keeps its journal, so a restarted dispatcher keeps its jobs")
    worker = roles.add_parser("worker", help="a worker that runs the pipeline for the dispatcher")
    worker.add_argument("--dispatcher", required=True, help="HOST:PORT of the dispatcher")
    worker.add_argument("--port", type=int, default=0, help="0 = any free port")
    args = parser.parse_args(argv)

    service = tf.data.experimental.service
    # Blocked before the servers start their threads, so that only sigwait below receives these.
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    if args.role == "dispatcher":
        server = service.DispatchServer(service.DispatcherConfig(
            port=args.port, work_dir=args.work_dir, fault_tolerant_mode=args.work_dir is not None))
        print(f"dispatcher at {server.target}", flush=True)
    else:
        server = service.WorkerServer(service.WorkerConfig(dispatcher_address=args.dispatcher, port=args.port))
        print(f"worker on port {args.port or 'any'} for dispatcher {args.dispatcher}", flush=True)
    signal.sigwait(stop_signals)
    server.stop()


if __name__ == "__main__":
    main()
