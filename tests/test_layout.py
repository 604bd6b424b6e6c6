"""The package's shape: imports point down the layers with no cycle, modules and functions stay short, and conf/
ships inside an installed wheel."""

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "echo_experiments"

# Top to bottom; a module may import its own layer or lower ones, never a higher one (docs/architecture.md).
LAYERS = [
    ("commands", ["cli", "__main__", "profile", "benchmark", "retime", "service", "report.__main__", "archive",
                  "sweep", "sweep_stops", "compose", "compare"]),
    ("training", ["train", "train_step", "tuning", "report", "stops", "clocks", "waits", "autopilot", "decisions"]),
    ("workloads", ["workloads"]),
    ("data and models", ["data", "models", "mean_ap", "optim", "parallel", "checkpoints", "events", "timing",
                         "tfdata"]),
    ("foundation", ["config", "schema", "specs", "runs", "record", "machine", "private_api", "data.placement"]),
]


def _layer(module: str) -> int:
    name = module.removeprefix("echo_experiments.")
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{module} is in no layer"
    return best[0]


def imports() -> dict[str, set[str]]:
    """Module -> the package modules it imports (at any depth of its code, lazy imports included)."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(("echo_experiments",) + path.relative_to(PACKAGE).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("echo_experiments"):
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names
                             if (PACKAGE / Path(*f"{node.module}.{a.name}".split(".")[1:])).with_suffix(".py").exists())
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("echo_experiments"))
        graph[module] = {m for m in found if m != module}
    return graph


def test_no_import_cycle():
    graph = imports()
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


def test_imports_never_point_up_a_layer():
    graph = {m: targets - {"echo_experiments"} for m, targets in imports().items() if m != "echo_experiments"}
    upward = [f"{m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})"
              for m, targets in graph.items() for t in targets if _layer(t) < _layer(m)]
    assert upward == []


# docs/architecture.md's bounds: a module a reader holds at once, a function read without scrolling.
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


def test_modules_and_functions_stay_short():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
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
    for name in ("echo_experiments", "conf"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(source)], check=True, capture_output=True, timeout=300)
    # pyproject.toml lists each config folder as a package by hand: a folder left out would not ship.
    shipped = {n for n in zipfile.ZipFile(next(wheels.glob("*.whl"))).namelist() if n.endswith(".yaml")}
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
