"""Show rationales: highlighted documents in the terminal (rich) and as one HTML file.

Every token falls in one category (terminal style, marker):

- ``hit``: selected and in the gold rationale (bold black on green, ``[ ]``)
- ``false``: selected, not in the gold rationale (italic white on red, ``{ }``)
- ``miss``: in the gold rationale, not selected (underlined yellow, ``_ _``)
- ``selected``: selected, the document has no gold (bold black on cyan, ``[ ]``)
- ``plain``: anything else

Runs of neighbouring tokens of one category are highlighted as one span. The
markers (on by default) keep the categories apart where there is no color at
all (``NO_COLOR``, output piped to a file); the styles differ in bold / italic /
underline too, for terminals that show attributes but no color.

Records that came from raw text (``record.text`` with ``record.offsets``) are
shown as that text, exactly, whitespace and punctuation included; pre-tokenized
records are shown as their tokens joined by single spaces.
"""

from __future__ import annotations

import html
from typing import Any, Iterable, Mapping, Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from rationale_cli.data.records import Record
from rationale_cli.output.prediction import format_prediction
from rationale_cli.runtime.errors import terminal_text

__all__ = [
    "HIT",
    "FALSE",
    "MISS",
    "SELECTED",
    "PLAIN",
    "STYLES",
    "MARKERS",
    "categorize",
    "document_text",
    "render_terminal",
    "legend",
    "render_html",
    "escape",
    "html_legend",
    "html_summary",
    "html_document",
    "html_page",
]

HIT = "hit"
FALSE = "false"
MISS = "miss"
SELECTED = "selected"
PLAIN = "plain"

STYLES = {
    HIT: "bold black on green",
    FALSE: "italic white on red",
    MISS: "underline yellow",
    SELECTED: "bold black on cyan",
}

MARKERS = {
    HIT: ("[", "]"),
    FALSE: ("{", "}"),
    MISS: ("_", "_"),
    SELECTED: ("[", "]"),
}

_DESCRIPTIONS = {
    HIT: "selected, in gold",
    FALSE: "selected, not in gold",
    MISS: "gold, not selected",
    SELECTED: "selected",
}


def categorize(selected: Sequence[int | bool], gold: Sequence[int] | None = None) -> list[str]:
    """One category per token (``hit``, ``false``, ``miss``, ``selected``, ``plain``).

    ``gold`` None means the document has no gold: selected tokens are then
    ``selected`` and nothing is a hit, false or miss.
    """
    if gold is None:
        return [SELECTED if s else PLAIN for s in selected]
    if len(gold) != len(selected):
        raise ValueError(f"selected has {len(selected)} tokens but gold has {len(gold)}")
    out = []
    for s, g in zip(selected, gold):
        if s:
            out.append(HIT if g else FALSE)
        else:
            out.append(MISS if g else PLAIN)
    return out


# --------------------------------------------------------------------------- #
# layout shared by the terminal and HTML views


def _record_categories(record: Record, selected: Sequence[int | bool]) -> list[str]:
    """Categories for ``record``; a ``selected`` shorter than the tokens (a model
    that truncates long documents) counts the rest as not selected."""
    n = len(record.tokens)
    sel = [1 if s else 0 for s in selected]
    if len(sel) > n:
        raise ValueError(f"document {record.id!r}: {len(sel)} selection entries for {n} tokens")
    sel += [0] * (n - len(sel))
    return categorize(sel, record.gold_mask())


def _offsets_usable(record: Record) -> bool:
    if record.text is None or record.offsets is None or len(record.offsets) != len(record.tokens):
        return False
    end = 0
    for start, stop in record.offsets:
        if not (end <= start <= stop <= len(record.text)):
            return False
        end = stop
    return True


def _layout(record: Record) -> tuple[list[str], list[str], str]:
    """``(gaps, words, tail)``: the document is ``gaps[0] words[0] gaps[1] words[1] ... tail``.

    From the raw text where offsets are present and consistent, so the text is
    reproduced exactly; otherwise tokens joined by single spaces.
    """
    if _offsets_usable(record):
        text = record.text
        gaps, words, end = [], [], 0
        for start, stop in record.offsets:
            gaps.append(text[end:start])
            words.append(text[start:stop])
            end = stop
        return gaps, words, text[end:]
    words = [str(t) for t in record.tokens]
    gaps = [""] + [" "] * (len(words) - 1) if words else []
    return gaps, words, "" if words or record.text is None else record.text


def _runs(categories: list[str]) -> list[tuple[str, int, int]]:
    """Maximal runs ``(category, start, end)`` of one category, end exclusive."""
    runs = []
    start = 0
    for i in range(1, len(categories) + 1):
        if i == len(categories) or categories[i] != categories[start]:
            runs.append((categories[start], start, i))
            start = i
    return runs


# --------------------------------------------------------------------------- #
# terminal



def document_text(record: Record, selected: Sequence[int | bool], *, markers: bool = True) -> Text:
    """The document as a rich :class:`~rich.text.Text` with its rationale highlighted.

    With ``markers`` each highlighted run is also wrapped in its category's
    marker characters (``[hit]``, ``{false}``, ``_miss_``, ``[selected]``), which
    are the only thing that tells categories apart on an output without
    styles. Without markers, ``.plain`` is the raw text (or the joined tokens).
    """
    categories = _record_categories(record, selected)
    gaps, words, tail = _layout(record)
    out = Text()
    for category, start, end in _runs(categories):
        out.append(terminal_text(gaps[start]))
        if category == PLAIN:
            for i in range(start, end):
                if i > start:
                    out.append(terminal_text(gaps[i]))
                out.append(terminal_text(words[i]))
            continue
        style = STYLES[category]
        if markers:
            out.append(MARKERS[category][0], style=style)
        for i in range(start, end):
            if i > start:
                # a gap inside a run is highlighted too, unless it breaks the line
                out.append(terminal_text(gaps[i]), style=None if "\n" in gaps[i] else style)
            out.append(terminal_text(words[i]), style=style)
        if markers:
            out.append(MARKERS[category][1], style=style)
    out.append(terminal_text(tail))
    return out


def render_terminal(
    record: Record,
    selected: Sequence[int | bool],
    prediction: str,
    *,
    gold_label: str | None = None,
    markers: bool = True,
) -> RenderableType:
    """One document for ``console.print``: a title line, then the highlighted text.

    The title line reads ``id · prediction: ... · gold: ...`` (the gold part only
    when ``gold_label`` is given). Gold rationale spans come from
    ``record.rationale``. See :func:`document_text` for ``markers``.
    """
    title = Text()
    title.append(terminal_text(str(record.id)), style="bold")
    title.append(" · prediction: ")
    title.append(terminal_text(str(prediction)), style="bold")
    if gold_label is not None:
        title.append(" · gold: ")
        title.append(terminal_text(str(gold_label)), style="bold")
    return Group(title, document_text(record, selected, markers=markers))


def document_item(output) -> dict[str, Any]:
    """What the renderers show of one model output (an ``inference.Output``): the
    record, its rationale and scores, the prediction and gold label as people read them."""
    label = output.record.label
    return {"record": output.record, "selected": output.selected, "scores": output.scores,
            "prediction": format_prediction(output.prediction),
            "gold_label": None if label is None else format_prediction(label)}


def print_documents(console, outputs) -> list[dict[str, Any]]:
    """Print the legend, then each output's document highlighted; returns their items
    (:func:`document_item`) for :func:`render_html`."""
    items = [document_item(output) for output in outputs]
    console.print(legend(any(item["record"].rationale is not None for item in items)))
    for item in items:
        console.print(render_terminal(item["record"], item["selected"], item["prediction"],
                                      gold_label=item["gold_label"]))
    return items


def legend(has_gold: bool, *, markers: bool = True) -> Text:
    """A one-line key to the highlight styles (with markers unless ``markers`` is False)."""
    categories = [HIT, FALSE, MISS] if has_gold else [SELECTED]
    out = Text()
    out.append("Legend: ", style="dim")
    for i, category in enumerate(categories):
        if i:
            out.append("  ")
        opening, closing = MARKERS[category] if markers else ("", "")
        out.append(f"{opening}{_DESCRIPTIONS[category]}{closing}", style=STYLES[category])
    return out


# --------------------------------------------------------------------------- #
# HTML

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 60em; padding: 0 1em; line-height: 1.6; color: #111; background: #fff; }
h1 { font-size: 1.4em; }
.legend { margin: 1em 0; padding: .5em .8em; background: #f6f6f6; border-radius: .3em; }
.legend mark, .legend span { margin-right: 1em; }
table.summary { border-collapse: collapse; margin: 1em 0; }
table.summary td, table.summary th { border: 1px solid #ccc; padding: .2em .6em; text-align: left; }
section.doc { border-top: 1px solid #ccc; padding: .8em 0; }
.meta { font-size: .9em; color: #444; margin-bottom: .3em; }
.meta b { color: #111; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 1.05em; }
mark { color: #000; padding: 0 .1em; border-radius: .2em; }
mark.hit { background: #8fdc8f; font-weight: bold; border: 1px solid #2a7a2a; }
mark.false { background: #f4a3a3; font-style: italic; border: 1px dashed #a02020; }
mark.selected { background: #9fdcee; font-weight: bold; border: 1px solid #2a6a8a; }
span.miss { background: #fff1b8; text-decoration: underline wavy #b07800; }
@media print { mark, span.miss { -webkit-print-color-adjust: exact; print-color-adjust: exact; } }
"""


def escape(value: Any) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes."""
    return html.escape(str(value), quote=True)


def html_legend(has_gold: bool) -> str:
    """The key to the highlight categories, as a ``div``."""
    categories = [HIT, FALSE, MISS] if has_gold else [SELECTED]
    parts = []
    for category in categories:
        tag = "span" if category == MISS else "mark"
        parts.append(f'<{tag} class="{category}">{escape(_DESCRIPTIONS[category])}</{tag}>')
    return '<div class="legend">' + "".join(parts) + "</div>"


def html_summary(summary: Mapping[str, Any]) -> str:
    """A two-column table of ``summary``'s keys and values (floats to 4 decimals, None as a dash)."""
    rows = []
    for key, value in summary.items():
        shown = f"{value:.4f}" if isinstance(value, float) else ("–" if value is None else value)
        rows.append(f"<tr><th>{escape(key)}</th><td>{escape(shown)}</td></tr>")
    return '<table class="summary">' + "".join(rows) + "</table>"


def html_document(item: Mapping[str, Any], index: int) -> tuple[str, bool]:
    """One highlighted document (an item as :func:`render_html` takes it) as a ``section``
    with id ``doc-INDEX``, and whether the document has gold."""
    record: Record = item["record"]
    selected = list(item.get("selected") or [])
    scores = item.get("scores")
    scores = list(scores) if scores is not None else []
    categories = _record_categories(record, selected)
    gaps, words, tail = _layout(record)

    def word(i: int) -> str:
        if i < len(scores) and scores[i] is not None:
            return f'<span title="{escape(f"{float(scores[i]):.3f}")}">{escape(words[i])}</span>'
        return escape(words[i])

    body = []
    for category, start, end in _runs(categories):
        body.append(escape(gaps[start]))
        inner = "".join((escape(gaps[i]) if i > start else "") + word(i) for i in range(start, end))
        if category == PLAIN:
            body.append(inner)
        else:
            tag = "span" if category == MISS else "mark"
            body.append(f'<{tag} class="{category}">{inner}</{tag}>')
    body.append(escape(tail))

    meta = [f"<b>{escape(record.id)}</b>", f"prediction: <b>{escape(item.get('prediction', ''))}</b>"]
    gold_label = item.get("gold_label")
    if gold_label is not None:
        meta.append(f"gold: <b>{escape(gold_label)}</b>")
    n_sel = sum(1 for c in categories if c in (HIT, FALSE, SELECTED))
    meta.append(f"{n_sel} of {len(categories)} tokens selected")
    has_gold = record.rationale is not None
    section = (
        f'<section class="doc" id="doc-{index}">'
        f'<div class="meta">{" · ".join(meta)}</div>'
        f'<div class="text">{"".join(body)}</div></section>'
    )
    return section, has_gold


def render_html(
    items: Iterable[Mapping[str, Any]],
    *,
    title: str,
    summary: Mapping[str, Any] | None = None,
) -> str:
    """One self-contained HTML page (inline CSS, no scripts, no external resources).

    Each item has ``record`` (:class:`Record`), ``selected`` (0/1 per token),
    ``scores`` (a float per token, shown as the token's tooltip; may be None),
    ``prediction`` (str) and ``gold_label`` (str or None). ``summary``, if
    given, is shown as a table of scores above the documents. All user strings
    (tokens, text, ids, labels) are HTML-escaped.
    """
    sections, any_gold, any_plain, any_scores = [], False, False, False
    for index, item in enumerate(items):
        any_scores |= item.get("scores") is not None
        section, has_gold = html_document(item, index)
        sections.append(section)
        any_gold |= has_gold
        any_plain |= not has_gold
    legend_html = ""
    if any_gold:
        legend_html += html_legend(True)
    if any_plain or not sections:
        legend_html += html_legend(False)
    parts = [legend_html]
    if any_scores:
        parts.append('<p class="meta">Hover a token to see its selection score.</p>')
    if summary:
        parts.append(html_summary(summary))
    parts.extend(sections if sections else ["<p>No documents.</p>"])
    return html_page(title, parts)


def html_page(title: str, body: Iterable[str], *, css: str = "") -> str:
    """A whole page: ``title`` as its title and heading, then the ``body`` parts (HTML,
    one per line); ``css`` is added to the page's own style sheet."""
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}{css}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
    ]
    return "\n".join([*head, *body, "</body></html>\n"])
