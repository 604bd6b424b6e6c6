"""``python -m echo_experiments [overrides]``: one run (or a sweep, with ``-m``); see cli.py."""

from echo_experiments.cli import main

if __name__ == "__main__":
    main()
