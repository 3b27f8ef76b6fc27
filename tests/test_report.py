"""`rationale report`: the precision-by-size sweep, and a page that is whole, escaped and self-contained."""

import re
from html.parser import HTMLParser

import pytest
import torch
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.output.run_report import labels, precision_by_size

SMALL = ["--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "200"]
ODD = "<b>&hk"  # a run folder whose name must come out escaped


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


class Tags(HTMLParser):
    """Every start tag with its attributes, and every text inside an <svg> with the svg's id."""

    def __init__(self):
        super().__init__()
        self.tags, self.texts, self.svg = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "svg":
            self.svg = attrs.get("id")

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg = None

    def handle_data(self, data):
        if self.svg is not None and data.strip():
            self.texts.append((self.svg, data.strip()))


@pytest.fixture(scope="module")
def one_thread():
    """Small models train several times faster on one thread than on two busy cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, one_thread):
    root = tmp_path_factory.mktemp("runs")
    found = {}
    for name, extractor, epochs in ((ODD, "hardkuma", 2), ("sa", "sparse-attention", 2), ("full", "full", 1)):
        result = invoke("train", "--data", "demo", "--out", root / name, "--extractor", extractor,
                        "--epochs", epochs, *SMALL)
        assert result.exit_code == 0, result.output
        found[name] = root / name
    return found


@pytest.fixture(scope="module")
def page(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    result = invoke("report", runs[ODD], runs["sa"], runs["full"], "--out", out / "report.html",
                    "--png", out / "png", "--examples", 2)
    assert result.exit_code == 0, result.output
    text = (out / "report.html").read_text(encoding="utf-8")
    parser = Tags()
    parser.feed(text)
    return text, parser, out / "png"


def test_precision_by_size_on_a_hand_computed_case():
    scores = [[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.8, 0.1, 0.0]]
    gold = [[1, 0, 1, 0], [0, 0, 1, 1, 0]]
    curve = precision_by_size(scores, gold, [0.2, 0.4, 1.0])
    # 20%: one token each (round(0.8) = round(1.0) = 1); the tie at 0.8 goes to the earlier token, not gold
    # 40%: two each: tokens 0 and 2 (both gold), then tokens 1 and 2 (one gold)
    assert curve.precisions == pytest.approx([1 / 2, 3 / 4, 4 / 9])
    assert curve.recalls == pytest.approx([1 / 4, 3 / 4, 1.0])
    assert curve.rates == pytest.approx([2 / 9, 4 / 9, 1.0])


def test_labels_tell_runs_of_one_name_apart(tmp_path):
    assert labels([tmp_path / "a" / "run", tmp_path / "b" / "run", tmp_path / "c"]) == ["a/run", "b/run", "c"]
    assert labels([tmp_path / "a", tmp_path / "a"]) == [f"{tmp_path.name}/a #1", f"{tmp_path.name}/a #2"]


def test_each_run_has_its_training_curves_and_its_line(page):
    _, parser, _ = page
    svgs = {attrs["id"]: attrs for tag, attrs in parser.tags if tag == "svg"}
    curves = {attrs["data-run"] for attrs in svgs.values() if attrs.get("data-plot") == "curves"}
    assert curves == {ODD, "sa", "full"}
    assert "precision-size" in svgs
    lines = {attrs["id"] for tag, attrs in parser.tags
             if tag == "g" and attrs.get("id", "").startswith("precision-size-line-")}
    assert lines == {"precision-size-line-b_hk", "precision-size-line-sa"}  # full's scores are all equal: no line
    legend = {text for svg, text in parser.texts if svg == "precision-size"}
    assert {ODD, "sa"} <= legend and "full" not in legend


def test_the_page_notes_a_run_it_cannot_rank(page):
    text, _, _ = page
    assert re.search(r"<b>full</b>: every token of a document has the same score", text)


def test_the_page_loads_nothing_from_outside(page):
    text, parser, _ = page
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text and "@import" not in text.lower()
    assert not {tag for tag, _ in parser.tags} & {"script", "link", "img", "iframe", "object", "embed"}
    for tag, attrs in parser.tags:
        for name, value in attrs.items():
            if name in ("src", "href", "xlink:href") or name.endswith(":href"):
                assert value.startswith(("#", "data:")), (tag, name, value)
    for target in re.findall(r"url\(\s*['\"]?([^)'\"]*)", text):
        assert target.startswith(("#", "data:")), target


def test_ids_are_unique_and_every_reference_resolves(page):
    text, parser, _ = page
    ids = [attrs["id"] for _, attrs in parser.tags if "id" in attrs]
    assert len(ids) == len(set(ids))
    references = re.findall(r"url\(#([^)]+)\)", text) + [
        value[1:] for _, attrs in parser.tags for name, value in attrs.items() if name.endswith("href")]
    assert references and set(references) <= set(ids)


def test_names_from_files_are_escaped(page):
    text, parser, _ = page
    assert ODD not in text
    assert "&lt;b&gt;&amp;hk" in text
    assert any(attrs.get("data-run") == ODD for tag, attrs in parser.tags if tag == "svg")


def test_png_files(page):
    _, _, folder = page
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["b_hk-curves.png", "full-curves.png", "precision-size.png", "sa-curves.png"]
    assert all((folder / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in names)


@pytest.mark.parametrize("make, expected", [
    (lambda p: p / "missing", "not a run directory"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "incomplete run directory"),
])
def test_a_bad_run_directory_is_one_line(tmp_path, make, expected):
    out = tmp_path / "report.html"
    result = invoke("report", make(tmp_path), "--out", out)
    assert result.exit_code == 2, result.output
    assert expected in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_a_run_on_one_file_is_measured_on_its_validation_documents(tmp_path, one_thread):
    import json

    data = tmp_path / "reviews.jsonl"
    data.write_text("".join(json.dumps({"text": f"{w} beer {i}", "label": s, "rationale": [[0, 1]]}) + "\n"
                            for i in range(20) for w, s in (("good", 0.9), ("bad", 0.1))))
    run = tmp_path / "run"
    assert invoke("train", "--data", data, "--out", run, "--epochs", 1, "--encoder", "cnn", *SMALL).exit_code == 0
    result = invoke("report", run, "--out", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r.html").read_text()
    assert "reviews.jsonl (validation documents)" in page
    moved = tmp_path / "elsewhere"
    data.rename(moved)
    result = invoke("report", run, "--out", tmp_path / "r2.html")
    assert result.exit_code == 2 and f"{run}: reading its documents" in result.output and "--data" in result.output
