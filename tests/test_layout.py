"""The package's shape: every module in a folder of docs/architecture.md's table, imports pointing down the
folders with no cycle, modules and functions short, and conf/ shipped inside an installed wheel. The paper's
reproduction (paper/) beside it by the same rules and its own table, imported by nothing of the package's."""

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "echo_experiments"
PAPER = ROOT / "paper"
TOP = "(top level)"
# The public echo stages at the top level: modules to import, not commands.
FACADES = {"tfdata", "grain"}


def folder_rules(text: str, heading: str = "## Layers") -> dict[str, dict]:
    """A table of layers of docs/architecture.md (under ``heading``): folder -> the folders it imports and the
    modules its cell names."""
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rules = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("folder", "---"):
            continue
        name = TOP if cells[0] == TOP else cells[0].strip("`/").replace("/", ".")
        rules[name] = {"imports": {c.strip("`/").replace("/", ".") for c in re.findall(r"`[^`]+`", cells[1])}
                       | ({"*"} if cells[1] == "every folder" else set()),
                       "names": set(re.findall(r"`([a-z_]+)`", cells[2]))}
    return rules


ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
RULES = folder_rules(ARCHITECTURE)
PAPER_RULES = folder_rules(ARCHITECTURE, "## The paper beside the tool")


def folder_of(module: str, rules: dict = RULES) -> str:
    """The folder (a row of the table) a module, or a package's __init__, is in: the longest that holds it."""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in rules:
            return ".".join(parts[:n])
    return TOP


def module_names(package: Path = PACKAGE) -> dict[str, Path]:
    names = {}
    for path in package.rglob("*.py"):
        module = ".".join((package.name,) + path.relative_to(package).with_suffix("").parts)
        names[module.removesuffix(".__init__")] = path
    return names


def imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports (at any depth of its code, lazy imports included)."""
    graph = {}
    for module, path in module_names(package).items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package.name):
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names
                             if (package / Path(*f"{node.module}.{a.name}".split(".")[1:])).with_suffix(".py").exists()
                             or (package / Path(*f"{node.module}.{a.name}".split(".")[1:]) / "__init__.py").exists())
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith(package.name))
        graph[module] = {m for m in found if m != module}
    return graph


@pytest.mark.parametrize("package", [PACKAGE, PAPER], ids=lambda p: p.name)
def test_no_import_cycle(package):
    graph = imports(package)
    state: dict[str, int] = {}

    def visit(module, trail):
        state[module] = 1
        for target in graph.get(module, ()):
            if state.get(target) == 1:
                pytest.fail("import cycle: " + " -> ".join(trail + [module, target]))
            if target not in state:
                visit(target, trail + [module])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [])


def wrong_imports(graph: dict[str, set[str]], rules: dict = RULES) -> list[str]:
    """The imports the table does not allow: into a folder that is not the module's own nor one its row names."""
    wrong = []
    for module, targets in sorted(graph.items()):
        own = folder_of(module, rules)
        allowed = rules[own]["imports"]
        for target in sorted(targets - {"echo_experiments"}):
            theirs = folder_of(target, rules)
            if theirs != own and "*" not in allowed and theirs not in allowed:
                wrong.append(f"{module} ({own}) imports {target} ({theirs})")
    return wrong


def misplaced(names: dict[str, Path], rules: dict = RULES) -> list[str]:
    """Top-level modules that are neither a command (``if __name__ == "__main__"``, or __main__) nor a facade the
    table names, and names the table gives that are no module; folders that are no row of the table."""
    top = {m.split(".")[1] for m in names if m.count(".") == 1 and folder_of(m, rules) == TOP}
    named = rules[TOP]["names"]
    wrong = [f"echo_experiments.{m} is at the top level but not in docs/architecture.md's table of layers"
             for m in sorted(top - named)]
    wrong += [f"docs/architecture.md names echo_experiments.{m}, which is no module" for m in sorted(named - top)]
    for m in sorted(top & named - FACADES):
        if m != "__main__" and '__name__ == "__main__"' not in names[f"echo_experiments.{m}"].read_text():
            wrong.append(f"echo_experiments.{m} is named a command but runs nothing as one")
    folders = {".".join(p.parent.relative_to(PACKAGE).parts) for p in PACKAGE.rglob("__init__.py")} - {""}
    wrong += [f"echo_experiments/{f.replace('.', '/')}/ is no folder of the table"
              for f in sorted(folders - set(rules))]
    return wrong


def test_every_module_is_in_a_folder_of_the_table():
    assert set(RULES) >= {TOP, "cli", "training", "report", "workloads", "data", "models", "core"}
    assert misplaced(module_names()) == []


def test_imports_never_point_up_or_across_the_folders():
    assert wrong_imports(imports()) == []


def test_the_paper_sits_beside_the_tool_by_its_own_table_and_the_tool_never_imports_it():
    """paper/ imports echo_experiments as a user would; no module of the package imports paper, at any depth,
    and none names the repository's results/ as a path."""
    assert set(PAPER_RULES) == {TOP, "verdicts", "worth"}
    names = module_names(PAPER)
    top = {m.split(".")[1] for m in names if m.count(".") == 1 and folder_of(m, PAPER_RULES) == TOP} - {"__init__"}
    assert top == PAPER_RULES[TOP]["names"]
    assert wrong_imports(imports(PAPER), PAPER_RULES) == []
    into_paper = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            found = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            into_paper += [f"{path.relative_to(ROOT)} imports {m}" for m in found if m.split(".")[0] == "paper"]
    assert into_paper == []
    named = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in sorted(PACKAGE.rglob("*.py"))
             for line in p.read_text().splitlines() if re.search(r"""["'/]results["'/]""", line)]
    assert named == []


def test_the_folder_rule_fails_for_a_module_in_the_wrong_place():
    """The checks above can fail: a stray top-level module, and data/ reaching up into training/."""
    names = {**module_names(), "echo_experiments.helpers": PACKAGE / "tfdata.py"}
    assert misplaced(names) == ["echo_experiments.helpers is at the top level but not in docs/architecture.md's "
                                "table of layers"]
    graph = {"echo_experiments.data.stream": {"echo_experiments.training.timing", "echo_experiments.core.specs"}}
    assert wrong_imports(graph) == ["echo_experiments.data.stream (data) imports echo_experiments.training.timing "
                                    "(training)"]


# docs/architecture.md's bounds: a module a reader holds at once, a function read without scrolling.
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


def test_modules_and_functions_stay_short():
    long = []
    for path in sorted([*PACKAGE.rglob("*.py"), *PAPER.rglob("*.py")]):
        text, name = path.read_text(), path.relative_to(ROOT)
        sizes = [(name, len(text.splitlines()), MAX_MODULE_LINES)]
        sizes += [(f"{name}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1, MAX_FUNCTION_LINES)
                  for node in ast.walk(ast.parse(text)) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        long += [f"{what}: {lines} lines" for what, lines, most in sizes if lines > most]
    assert long == []


def test_conf_is_at_the_top_level():
    assert (ROOT / "conf" / "config.yaml").is_file()
    assert not (PACKAGE / "conf").exists()


def test_an_installed_wheel_finds_its_configs(tmp_path):
    """Build a wheel from the repo, install it (not editable) into a fresh venv that borrows this one's
    dependencies, and compose every workload and preset from a directory outside the checkout."""
    source = tmp_path / "source"  # a copy: setuptools writes build/ into the tree it builds
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("echo_experiments", "conf", "paper"):  # paper/ too: the wheel must leave it out
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(source)], check=True, capture_output=True, timeout=300)
    # pyproject.toml lists each config folder as a package by hand: a folder left out would not ship.
    names = zipfile.ZipFile(next(wheels.glob("*.whl"))).namelist()
    assert [n for n in names if n.startswith("paper/")] == []  # the tool only, never the paper's reproduction
    shipped = {n for n in names if n.endswith(".yaml")}
    assert shipped == {f"echo_experiments/conf/{p.relative_to(ROOT / 'conf').as_posix()}"
                       for p in (ROOT / "conf").rglob("*.yaml")}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # The dependencies come from this venv's site-packages, appended after the new venv's own.
    (Path(site) / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                    *map(str, wheels.glob("*.whl"))], check=True, capture_output=True, timeout=300)
    workloads = sorted(p.stem for p in (ROOT / "conf" / "workload").glob("*.yaml"))
    presets = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
    script = f"""
import echo_experiments, echo_experiments.workloads.registry
from hydra import compose, initialize_config_module
assert "site-packages" in echo_experiments.__file__, echo_experiments.__file__
with initialize_config_module(version_base="1.3", config_module="echo_experiments.conf"):
    for w in {workloads!r}:
        assert compose("config", overrides=["workload=" + w]).workload.name == w
    for p in {presets!r}:
        compose("config", overrides=["experiment=" + p], return_hydra_config=True)
print("composed", len({workloads!r}), "workloads and", len({presets!r}), "presets")
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([python, "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"composed {len(workloads)} workloads and {len(presets)} presets" in out.stdout
    cli = subprocess.run([python, "-m", "echo_experiments", "--cfg", "job", "workload=transformer_pydocs"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "name: transformer_pydocs" in cli.stdout


# Facts of the run layout and of what a reader sees, each spelled in one module (docs/architecture.md): the string
# appears as a whole literal nowhere else in the package or the paper.
ONE_PLACE = {"checkpoints": "echo_experiments/core/rundir.py", "tb": "echo_experiments/core/rundir.py",
             "timed": "echo_experiments/core/rundir.py", "timed/": None,
             "example, before aug.": "echo_experiments/core/placement.py",
             "before aug.": "echo_experiments/core/placement.py", "batch echoing": "echo_experiments/core/placement.py",
             "trainer.max_steps=200": None}
# Names defined at the top of exactly one module.
DEFINED_ONCE = ("SHARED_CORES", "PROFILE_RUN", "CHECKPOINTS", "TB", "TIMED", "was_alone")


def test_each_fact_is_stated_in_one_module():
    spelled, defined = {}, {}
    for path in sorted([*PACKAGE.rglob("*.py"), *PAPER.rglob("*.py")]):
        tree, name = ast.parse(path.read_text()), path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in ONE_PLACE:
                spelled.setdefault(node.value, set()).add(name)
        for node in tree.body:
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            names += [e.id for t in targets if isinstance(t, ast.Tuple) for e in t.elts if isinstance(e, ast.Name)]
            names += [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []
            for n in set(names) & set(DEFINED_ONCE):
                defined.setdefault(n, set()).add(name)
    assert {k: v for k, v in spelled.items() if v != ({ONE_PLACE[k]} if ONE_PLACE[k] else set())} == {}
    assert {k: v for k, v in defined.items() if len(v) != 1} == {} and set(defined) == set(DEFINED_ONCE)
    registry = (PACKAGE / "workloads" / "registry.py").read_text()
    assert '"none"' not in registry and "'none'" not in registry  # Placement.NONE


def covering_tests(text: str = ARCHITECTURE) -> dict[str, str]:
    """docs/architecture.md's table of the modules tested elsewhere than a test file of their own: module -> test."""
    section = text.split("**Finding a module's test.**", 1)[1]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z_/]+)` \| `([^`]+)` \|$", section, re.M)}


def untested(covered: dict[str, str]) -> list[str]:
    """Modules with neither a test file of their own nor a row of the table, and rows that name no file."""
    wrong = []
    for package, tests in ((PACKAGE, ROOT / "tests" / "unit"), (PAPER, ROOT / "tests" / "paper")):
        for path in sorted(package.rglob("*.py")):
            if path.name == "__init__.py":
                continue
            rel = path.relative_to(package).with_suffix("")
            name = rel.as_posix() if package == PACKAGE else f"paper/{rel.as_posix()}"
            own = (tests / rel.parent / f"test_{rel.name}.py") if package == PACKAGE else tests / f"test_{rel.name}.py"
            if not own.exists() and name not in covered:
                wrong.append(f"{name}: no {own.relative_to(ROOT)} and no row in docs/architecture.md's test table")
    wrong += [f"{m}: its test {t} does not exist" for m, t in covered.items() if not (ROOT / t).is_file()]
    return wrong


def test_every_module_has_a_test_a_reader_can_find():
    assert untested(covering_tests()) == []
    assert untested({}) != []  # the check can fail: without the table most modules have no test of their own
