import html
import io
import os
import re

import pytest
from rich.console import Console

from rationale_cli.data.records import Record
from rationale_cli.output.render import (
    categorize,
    document_text,
    legend,
    render_html,
    render_terminal,
)
from rationale_cli.runtime.atomic import atomic_path, write_text_atomic


def beer_record():
    return Record(
        id="d1",
        tokens=["the", "beer", "tastes", "great", "bad", "smell"],
        label="pos",
        rationale=[(2, 4), (5, 6)],
    )


def raw_record():
    text = "  Great   head,\n\tpoor taste!  "
    words = [(m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", text)]
    return Record(
        id="raw",
        tokens=[text[s:e] for s, e in words],
        rationale=[(0, 2)],
        text=text,
        offsets=words,
    )


def console_output(*renderables, **kwargs):
    out = io.StringIO()
    console = Console(file=out, width=100, **kwargs)
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


def test_categorize():
    assert categorize([1, 1, 0, 0], [1, 0, 1, 0]) == ["hit", "false", "miss", "plain"]
    assert categorize([True, False], None) == ["selected", "plain"]
    with pytest.raises(ValueError):
        categorize([1, 0], [1])


def test_no_color_terminal_distinguishes_hit_false_miss():
    record = beer_record()
    output = console_output(
        render_terminal(record, [0, 0, 1, 0, 1, 0], "pos", gold_label="neg"), legend(True), no_color=True
    )
    assert "\x1b" not in output
    lines = output.splitlines()
    assert lines[0] == "d1 · prediction: pos · gold: neg"
    assert lines[1] == "the beer [tastes] _great_ {bad} _smell_"
    assert "[" in lines[2] and "{" in lines[2] and "_" in lines[2]


def test_no_color_but_attributes_differ_in_non_color_attribute():
    record = beer_record()
    output = console_output(
        render_terminal(record, [0, 0, 1, 0, 1, 0], "pos", markers=False),
        no_color=True,
        force_terminal=True,
    )
    assert "\x1b[1mtastes" in output  # hit: bold
    assert "\x1b[3mbad" in output  # false: italic
    assert "\x1b[4mgreat" in output  # miss: underline


def test_runs_share_one_marker_and_no_gold_is_selected():
    record = Record(id="x", tokens=["a", "b", "c", "d"])
    assert document_text(record, [1, 1, 0, 1]).plain == "[a b] c [d]"
    assert legend(False).plain == "Legend: [selected]"


def test_raw_text_is_reproduced_exactly():
    record = raw_record()
    selected = [1, 0, 0, 1, 1, 0]
    assert document_text(record, selected, markers=False).plain == record.text
    marked = document_text(record, selected).plain
    assert marked == "  [Great]   _head_,\n\t{poor taste}!  "
    assert re.sub(r"[\[\]{}_]", "", marked) == record.text


def test_selection_shorter_than_tokens_is_padded_longer_is_an_error():
    record = beer_record()
    assert document_text(record, [1, 1], markers=False).plain == "the beer tastes great bad smell"
    with pytest.raises(ValueError):
        document_text(record, [0] * 7)


def test_terminal_escapes_control_sequences():
    record = Record(id="evil\x1b[2J", tokens=["a\x1b[31mred", "b\u202egnp.exe", "c\u2066d"])
    output = console_output(render_terminal(record, [1, 0, 0], "p\x07"), no_color=True)
    assert "\x1b" not in output and "\x07" not in output
    assert "\u202e" not in output and "\u2066" not in output and "b\ufffdgnp.exe" in output


def test_html_escapes_and_is_self_contained():
    nasty = '<script>alert("x")</script>'
    record = Record(
        id='id<1>&"',
        tokens=["fine", nasty, "&", "ok"],
        rationale=[(1, 3)],
    )
    page = render_html(
        [
            {
                "record": record,
                "selected": [0, 1, 0, 1],
                "scores": [0.1, 0.9, 0.2, 0.7],
                "prediction": "<b>pos</b>",
                "gold_label": "a&b",
            }
        ],
        title="Rationales <&>",
    )
    assert "<script" not in page.lower()
    assert html.escape(nasty, quote=True) in page
    assert ">&amp;<" in page or "&amp;</span>" in page
    assert "id&lt;1&gt;&amp;&quot;" in page
    assert "&lt;b&gt;pos&lt;/b&gt;" in page and "a&amp;b" in page
    assert "Rationales &lt;&amp;&gt;" in page
    assert 'title="0.900"' in page
    for forbidden in ("http://", "https://", "src=", "<link", "@import", "url("):
        assert forbidden not in page
    assert 'class="hit"' in page and 'class="miss"' in page and 'class="false"' in page
    assert 'class="legend"' in page


def test_html_raw_text_reproduced_exactly():
    record = raw_record()
    page = render_html(
        [{"record": record, "selected": [1, 0, 0, 1, 1, 0], "scores": None, "prediction": "neg", "gold_label": None}],
        title="t",
        summary={"precision": 0.5, "recall": None},
    )
    body = re.search(r'<div class="text">(.*?)</div>', page, re.DOTALL).group(1)
    assert html.unescape(re.sub(r"<[^>]+>", "", body)) == record.text
    assert "0.5000" in page


def test_html_without_documents():
    page = render_html([], title="empty")
    assert "No documents." in page and page.startswith("<!DOCTYPE html>")


def test_atomic_write(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "old\n")
    assert target.read_text() == "old\n"
    umask = os.umask(0)
    os.umask(umask)
    if os.name == "posix":
        assert target.stat().st_mode & 0o777 == 0o666 & ~umask

    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]

    with pytest.raises(TypeError):
        write_text_atomic(target, None)  # type: ignore[arg-type]
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]

    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
