"""The reproduction of the paper (Choi et al. 2019) with the tool, beside it: its claims and their rules, the
autopilot's checks, what a copy was worth, and the commands that time and keep this repository's sweeps. It
imports ``echo_experiments``; the package never imports it (docs/architecture.md, "The paper beside the tool")."""
