"""The documentation lives in the repository: no link or cited file points outside it or at nothing, every
README command runs as written (make -n, the reporter) or composes and validates every job it would run (the
training commands), and every config key is documented."""

import contextlib
import importlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from echo_experiments.cli.plan import check_command_line, plan
from echo_experiments.core import config
from echo_experiments.workloads.registry import TASKS

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [*DOCS, ROOT / "results" / "README.md", *sorted((ROOT / "results").glob("*/*/NOTES.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A cited markdown file: a path into the repository's folders, or a capitalised name like README.md.
CITED = re.compile(r"(?<![\w/.-])((?:docs|results|examples|tests|echo_experiments|conf)/[\w./-]*\.md|[A-Z][A-Z_]+\.md)")
CODE = [*(ROOT / "echo_experiments").rglob("*.py"), *(ROOT / "conf").rglob("*.yaml"), *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "examples").rglob("*"), ROOT / "Makefile", ROOT / "pyproject.toml", *(ROOT / "notebooks").glob("*")]


def test_every_link_of_the_documentation_resolves_inside_the_repository():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://", "#")):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            if not path.is_relative_to(ROOT) or not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_markdown_file_the_code_cites_exists():
    """A path is looked up from the repository's root; a bare capitalised name (README.md, a sweep's NOTES.md)
    must exist somewhere in it."""
    names = {p.name for p in ROOT.rglob("*.md") if ".venv" not in p.parts}
    missing = []
    for path in CODE:
        if path.is_file() and path.suffix not in (".png", ".svg"):
            for cited in CITED.findall(path.read_text(errors="replace")):
                if not ((ROOT / cited).exists() if "/" in cited else cited in names):
                    missing.append(f"{path.relative_to(ROOT)}: {cited}")
    assert missing == []


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_section_the_code_cites_exists():
    """``docs/<page>.md, "Heading"`` and ``docs/<page>.md#anchor`` in code and configs name a heading there."""
    cited = re.compile(r'((?:docs|results|examples)/[\w./-]*\.md|README\.md)(?:, "([^"]+)"|#([\w-]+))')
    missing, seen = [], 0
    for path in CODE:
        if path.is_file() and path.suffix not in (".png", ".svg"):
            for page, heading, tag in cited.findall(path.read_text(errors="replace")):
                headings = {anchor(h) for h in re.findall(r"^#+ (.+)$", (ROOT / page).read_text(), re.M)}
                seen += 1
                if (tag or anchor(heading)) not in headings:
                    missing.append(f"{path.relative_to(ROOT)}: {page}, {heading or '#' + tag}")
    assert missing == [] and seen > 0


def readme_commands() -> list[tuple[str, list[str]]]:
    """(folder, argv) of every command line in the README's code blocks, comments cut off."""
    commands, folder = [], "."
    for block in re.findall(r"```\n(.*?)```", (ROOT / "README.md").read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():  # a command continued over lines is one line
            if line.split(maxsplit=1)[:1] not in (["cd"], ["python"], ["make"]):
                continue  # a diagram or a listing, not a command
            words = shlex.split(line.split(" #")[0])
            if words[:1] == ["cd"]:
                folder = words[1]
            elif words[:1] in (["python"], ["make"]):
                commands.append((folder, words))
    return commands


def test_the_readme_has_the_commands_a_newcomer_needs_in_at_most_250_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    argv = [" ".join(words) for _, words in readme_commands()]
    assert {"make run", "make test", "make test-fast"} <= set(argv)
    assert any(a.startswith("python -m echo_experiments -m experiment=") for a in argv)


@pytest.mark.parametrize("folder,words", readme_commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_every_readme_command_runs_as_written(folder, words, tmp_path, monkeypatch, capsys):
    """make: what make would run (not the suite inside itself); the reporter: for real, on a copy of a committed
    sweep's runs; a training command: every job composed and validated, as the command does before it runs any
    (training is the other tests' work); the profiler and compare: their --help, and their overrides validated."""
    cwd = ROOT / folder
    if words[0] == "make":
        proc = subprocess.run(["make", "-n", *words[1:]], cwd=cwd, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return
    module, args = words[2], words[3:]
    if module == "echo_experiments.report":
        shutil.copytree(ROOT / "results" / "placements_e2_cpu" / "fashion_mnist" / "runs", tmp_path / args[0])
        proc = subprocess.run([sys.executable, "-m", module, *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    elif module in ("echo_experiments.profile", "echo_experiments.compare"):  # they time and train: their --help
        with pytest.raises(SystemExit) if module.endswith("compare") else contextlib.nullcontext():
            assert importlib.import_module(module).main(["--help"]) == 0
        assert capsys.readouterr().out.startswith(f"usage: python -m {module}")
        assert check_command_line(args) is None  # and their overrides compose and validate
    else:
        assert module == "echo_experiments", words
        monkeypatch.chdir(cwd)  # a user's workload module is imported from the folder the command runs in
        monkeypatch.syspath_prepend(str(cwd))
        assert plan(args).jobs > 0


def _keys(schema: type, prefix: str):
    for f in fields(schema):
        if is_dataclass(f.type):
            yield from _keys(f.type, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}"


def test_every_config_key_is_documented():
    documented = (ROOT / "docs" / "configuration.md").read_text()
    keys = set(_keys(config.Config, "")) | {f"workload.{k}" for task in TASKS.values() for k in _keys(task.schema, "")}
    assert sorted(k for k in keys if f"`{k}`" not in documented) == []


def named_commands() -> set[str]:
    """Every ``python -m echo_experiments...`` (and ``python -m paper...``) the README and docs/ name."""
    command = re.compile(r"python -m ((?:echo_experiments|paper)(?:\.[a-z_]+)*)")
    return {m.group(1) for page in DOCS for m in command.finditer(page.read_text())}


# The commands with an argparse --help, by the module whose main() parses it.
HELPED = {"paper.archive": "paper.archive", "echo_experiments.benchmark": "echo_experiments.benchmark",
          "echo_experiments.compare": "echo_experiments.compare", "paper.retime": "paper.retime",
          "echo_experiments.service": "echo_experiments.service",
          "echo_experiments.report": "echo_experiments.report.__main__", "paper.verdicts": "paper.verdicts.__main__"}


def test_every_command_the_docs_name_has_a_help():
    """The trainer's own command answers --help (Hydra's), the profiler's is checked with the README's commands,
    and every other is one of those whose --help is checked below."""
    assert named_commands() - {"echo_experiments", "echo_experiments.profile", "echo_experiments.tfdata"} <= set(HELPED)
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "Runs a training job" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("module", sorted(HELPED.values()))
def test_each_commands_help_holds_its_whole_description(module, capsys):
    """--help prints what the module's docstring says of the command, not its first line cut mid-sentence."""
    command = importlib.import_module(module)
    with pytest.raises(SystemExit) as stop:
        command.main(["--help"])
    assert stop.value.code == 0
    assert " ".join(command.__doc__.split()) in " ".join(capsys.readouterr().out.split())


# The package's commands: the top-level modules that run as one (tests/test_layout.py names them).
COMMANDS = ("echo_experiments", "echo_experiments.compare", "echo_experiments.profile", "echo_experiments.report",
            "echo_experiments.benchmark", "echo_experiments.service")


@pytest.mark.parametrize("module", [*COMMANDS, "paper.retime", "paper.archive", "paper.verdicts"])
def test_each_commands_help_answers_without_tensorflow_or_jax(module):
    """--help must come in a second or two, not after TensorFlow and JAX load (tens of seconds on 2 cores): the
    command line is parsed before anything heavy is imported."""
    probe = ("import runpy, sys\nsys.argv = ['x', '--help']\ntry:\n    runpy.run_module(%r, run_name='__main__')\n"
             "except SystemExit:\n    pass\nprint('tensorflow' in sys.modules, 'jax' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe % module], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.stderr.strip().splitlines()[-1] == "False False", proc.stderr[-2000:]
    assert "usage" in proc.stdout.lower() or "Powered by Hydra" in proc.stdout


def test_the_top_level_help_lists_every_command():
    proc = subprocess.run([sys.executable, "-m", "echo_experiments", "--help"], capture_output=True, text=True,
                          timeout=120)
    for module in COMMANDS[1:]:
        assert f"python -m {module}" in proc.stdout, module
