"""The reporter: run directories in, tables, figures and report.md out (python -m echo_experiments.report)."""
