"""Every command the README and docs/ name runs: ``python -m <module> --help`` answers with its usage, exit 0."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def named_commands() -> set[str]:
    return {m.group(1) for page in PAGES for m in re.finditer(r"python -m (echo_experiments(?:\.[a-z_]+)*)",
                                                              page.read_text())}


def test_every_command_the_docs_name_answers_help():
    commands = sorted(named_commands())
    assert {"echo_experiments", "echo_experiments.compare", "echo_experiments.report",
            "echo_experiments.report.verdicts"} <= set(commands)
    # At once: most of the time is each command importing TensorFlow and JAX.
    procs = {m: subprocess.Popen([sys.executable, "-m", m, "--help"], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True) for m in commands}
    answers = {m: (p.communicate(timeout=300)[0], p.returncode) for m, p in procs.items()}
    wrong = {m: f"exit {code}: {out[-300:]}" for m, (out, code) in answers.items()
             if code != 0 or not re.search(r"usage|Runs a training job", out)}
    assert wrong == {}
