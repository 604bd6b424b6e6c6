"""The reporter and the machines: a study is what runs on one CPU model (docs/protocol.md, Machines)."""

from test_report import make_run

from echo_experiments.report.__main__ import main
from echo_experiments.report.collect import collect
from paper.verdicts import evidence
from paper.verdicts.claims import BASELINE, Condition


def test_a_study_from_several_cpu_models_is_refused_unless_asked(tmp_path, capsys):
    runs = tmp_path / "runs"
    make_run(runs, "x", trial=0, fresh=1000, seconds=10.0, steps=16, machine={"cpu": "model X"})
    make_run(runs, "old", trial=1, fresh=1200, seconds=12.0, steps=19)  # made before machines were recorded
    assert main([str(runs), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # A run that names no machine counts as a model of its own beside one that names its own.
    assert err == ["error: runs of one study come from several CPU models (study:0:0: 2 CPU models), whose numbers "
                   "differ: rerun the study on one machine, or add --mixed-machines to report it as it is, marked"]
    assert main([str(runs), "--out", str(tmp_path / "out"), "--mixed-machines"]) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "**A study's runs from several CPU models** (--mixed-machines)" in report


def _two_studies(root, study_1_echo_cpu: str):
    """Baseline and batch echoing at e=2 in studies 0 and 1; every run on model X but study 1's echoed one."""
    for study in range(2):
        make_run(root, f"b{study}", study=study, fresh=1000, steps=16, machine={"cpu": "model X"})
        make_run(root, f"e{study}", study=study, placement="after_batching", factor=2.0, fresh=800, steps=25,
                 machine={"cpu": study_1_echo_cpu if study else "model X"})
    return collect([root])[0]


def test_a_comparison_decides_nothing_when_a_study_mixes_cpu_models_only(tmp_path):
    echoed = Condition("after_batching")
    trials = _two_studies(tmp_path / "mixed", "model Y")
    chosen = [evidence.select(trials, c) for c in (echoed, BASELINE)]
    # Study 1's pair sets model Y's echoed run against model X's baseline: a machine in the pair.
    assert evidence.flags(trials, chosen, [echoed, BASELINE])["machines"] == "study:0:1: 2"
    # Each study on one model, the models differing between studies: each pair compares conditions only.
    trials = _two_studies(tmp_path / "apart", "model X")
    trials.loc[trials["study_key"] == "study:0:1", "cpu"] = "model Y"
    chosen = [evidence.select(trials, c) for c in (echoed, BASELINE)]
    assert evidence.flags(trials, chosen, [echoed, BASELINE])["machines"] == ""


def test_the_report_names_the_cpu_model_of_each_study(tmp_path):
    runs = tmp_path / "runs"
    for study, cpu in enumerate(["model X", "model X", "model Y"]):
        make_run(runs, f"b{study}", study=study, fresh=1000, steps=16, machine={"cpu": cpu})
        make_run(runs, f"e{study}", study=study, placement="after_batching", factor=2.0, fresh=800, steps=25,
                 machine={"cpu": cpu})
    assert main([str(runs), "--out", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "**Studies from several CPU models.**" in report
    assert "| model X | study:0:0, study:0:1 |" in report and "| model Y | study:0:2 |" in report
