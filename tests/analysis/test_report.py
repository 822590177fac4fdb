"""The HTML report: self-contained, every figure embedded, every section present."""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from analysis import figures
from analysis.metrics import PAPER_METRICS
from analysis.report import build_report, report_study, write_report
from analysis.study import open_study
from analysis.trial import read_trial
from capture_trainer.errors import AnalysisError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class TagCollector(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def parse(text: str) -> list[tuple[str, dict[str, str | None]]]:
    collector = TagCollector()
    collector.feed(text)
    return collector.tags


@pytest.fixture(scope="module")
def study(study_dir):
    return open_study(study_dir)


@pytest.fixture(scope="module")
def report_html(study, study_dir) -> str:
    """The study's report with two extra trials asked for: one by id, one by file."""
    return build_report(study, ["ng-p1-r1", str(study_dir / "apf-p0-r0.parquet")])


def test_every_figure_is_an_embedded_png_and_nothing_is_external(report_html):
    tags = parse(report_html)
    images = [attrs for tag, attrs in tags if tag == "img"]
    # bar charts + 1 trajectory figure + 1 per scenario + 5 figures for each of 4 examples and 2 extra trials
    assert len(images) == len(figures.STUDY_BAR_METRICS) + 1 + 1 + 5 * 6
    for attrs in images:
        src = attrs["src"] or ""
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1], validate=True).startswith(PNG_SIGNATURE)
        assert attrs.get("alt")
    for tag, attrs in tags:
        assert tag not in {"script", "link", "iframe", "object", "embed"}
        for key in ("src", "href"):
            value = attrs.get(key) or ""
            assert not value.startswith(("http:", "https:", "//", "file:")), (tag, value)
    assert "url(" not in report_html


def test_report_shows_design_table_tests_and_problem_trials(report_html):
    assert "latin-square" in report_html and "synthetic-paper" in report_html
    for metric in PAPER_METRICS:
        assert metric in report_html
    unreached = report_html.split("Never reached: 1", 1)[1].split("</table>", 1)[0]
    assert "ng-p1-r1" in unreached
    incomplete = report_html.split("Incomplete (crashed or unfinished): 1", 1)[1].split("</table>", 1)[0]
    assert "dg-p2-r1" in incomplete
    assert "Friedman" in report_html and "Wilcoxon" in report_html
    assert "No participant in common (not compared): APF–AS, DG–AS, NG–AS." in report_html


def test_extra_trials_are_shown_and_unknown_ones_are_errors(report_html, study, factory, synth):
    assert "Trial ng-p1-r1 (NG, participant p1)" in report_html
    assert "Trial apf-p0-r0 (APF, participant p0)" in report_html
    with pytest.raises(AnalysisError, match="neither a trial id"):
        build_report(study, ["no-such-trial"])
    factory.write("single", synth.approach())
    assert report_study(factory.root) == factory.root / "report.html"
    text = (factory.root / "report.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")


def test_write_report_creates_directories_and_reports_unwritable_paths(study, tmp_path, monkeypatch):
    monkeypatch.setattr("analysis.report.build_report", lambda *args, **kwargs: "<!DOCTYPE html><html></html>")
    path = write_report(study, tmp_path / "deep" / "r.html")
    assert path.read_text(encoding="utf-8") == "<!DOCTYPE html><html></html>"
    (tmp_path / "file").write_text("")
    with pytest.raises(AnalysisError, match="cannot write the report"):
        write_report(study, tmp_path / "file" / "r.html")


def test_figures_use_their_own_agg_canvas_and_leave_global_state_alone(study_dir):
    backend = matplotlib.get_backend()
    trial = read_trial(study_dir / "dg-p0-r0.parquet")
    made = figures.trial_figures(trial)
    assert list(made) == [
        "Velocity error",
        "Position error",
        "Base reaction torque",
        "Joint angles",
        "Calculated and actuated force",
    ]
    for figure in made.values():
        assert isinstance(figure.canvas, FigureCanvasAgg)
        assert figures.png_bytes(figure).startswith(PNG_SIGNATURE)
    force_axes = made["Calculated and actuated force"].axes
    assert len(force_axes) == 3
    # the device limit (3 N in the metadata) is drawn at +-3 N on every axis
    limits = {round(line.get_ydata()[0], 6) for line in force_axes[0].lines if line.get_linestyle() == ":"}
    assert limits == {-3.0, 3.0}
    assert len(made["Joint angles"].axes[0].lines) >= trial.n_joints
    assert matplotlib.get_backend() == backend


def test_a_study_file_from_the_study_runner_is_shown_as_readable_tables(study_dir, tmp_path):
    """study.json as trials.study writes it: protocol, participants with their order."""
    import shutil

    root = tmp_path / "study"
    shutil.copytree(study_dir, root)
    design = {
        "protocol": {"name": "mini", "seed": 5, "conditions": ["dg", "ng"], "participants": {"kind": "simulated", "count": 1}},
        "participants": {"p0": {"kind": "novice", "params": {"reaction_time_s": 0.25}, "order": ["t1", "t2", "t3"]}},
        "trials": [
            {"trial_id": "t1", "condition": "ng"},
            {"trial_id": "t2", "condition": "ng"},
            {"trial_id": "t3", "condition": "dg"},
        ],
    }
    (root / "study.json").write_text(json.dumps(design))
    html = (report_study(root)).read_text()
    assert "Participants and their counterbalanced condition order" in html
    assert "NG → DG" in html  # consecutive trials of one condition form one block
    assert "0.25" in html and "mini" in html
    assert '"trials"' not in html  # the raw trial list is not dumped into the report
