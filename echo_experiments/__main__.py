"""The command: ``python -m echo_experiments [overrides]`` (installed as ``echo_experiments``) runs one job, a
sweep with ``-m``; cli/ is the command-line layer. Nothing heavy is imported before the start-up signals are
caught, so a Ctrl-C while Hydra, TensorFlow and JAX load ends with one line too."""

import sys

from echo_experiments.core.signals import StartupInterrupted, stop_at_startup


def main() -> None:
    stop_at_startup()
    try:
        from echo_experiments.cli import main as cli  # the heavy imports, after the handlers

        cli.main(sys.argv[1:])
    except StartupInterrupted as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(128 + e.signum)


if __name__ == "__main__":
    main()
