"""The command line of ``python -m echo_experiments``: every job composed and checked before anything runs
(plan.py, compose.py), one-line errors and exit codes (exits.py), and a sweep's worker processes stopping
cleanly (worker_stops.py). Nothing below this folder imports it."""
