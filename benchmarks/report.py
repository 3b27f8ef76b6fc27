"""Regenerate benchmarks/RESULTS.md from benchmarks/results/*.jsonl, beside the published figures.
The prose around the tables is benchmarks/RESULTS.template.md.

    python benchmarks/report.py
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
from collections import defaultdict
from pathlib import Path
from string import Template

from rationale_cli.data.readers.beer import ASPECTS as BEER_ASPECTS
from rationale_cli.models.selectors import selector_class

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"  # one JSONL file per benchmark
REPORT = HERE / "RESULTS.md"
TEMPLATE = HERE / "RESULTS.template.md"  # the prose, in sections

ASPECTS = dict(enumerate(BEER_ASPECTS))

# Published beer figures on the same test set (annotations.json), trained on the full beer
# training sets: Bastings et al. (2019), Table 1 (full-text MSE) and Table 2 (precision % / selected %).
PUBLISHED = {
    ("full", 0): "MSE 0.0088 (BiRCNN, Table 1)",
    ("full", 1): "MSE 0.0088 (BiRCNN, Table 1)",
    ("full", 2): "MSE 0.0088 (BiRCNN, Table 1)",
    ("attention", 0): "P 80.6 at 13% (Table 2)",
    ("attention", 1): "P 88.4 at 7% (Table 2)",
    ("attention", 2): "P 65.3 at 7% (Table 2)",
    ("bernoulli", 0): "P 96.3 at 14% (Lei et al., Table 2)",
    ("bernoulli", 1): "P 95.1 at 7% (Lei et al., Table 2)",
    ("bernoulli", 2): "P 80.2 at 7% (Lei et al., Table 2)",
    ("hardkuma", 0): "P 98.1 at 13% (Table 2)",
    ("hardkuma", 1): "P 96.8 at 7% (Table 2)",
    ("hardkuma", 2): "P 89.8 at 7% (Table 2)",
    # sparse marginalization and sparse attention: no beer figures in their papers
}
# k-subset extractors, keyed (extractor, aspect, k): subset precision %, test MSE (x100 in the
# papers). SIMPLE: Ahmed et al. (2023), Tables 2-3 (L2X architecture). Top-k and correlated
# top-k: Paulus et al. (2020), Tables 3-5, complex architecture; their test set is half of the
# heldout reviews, precision on the same 993 annotated reviews.
PUBLISHED.update({
    ("simple", 0, 10): "P 66.8, MSE 0.0235 (SIMPLE, Table 2)",
    ("simple", 1, 5): "P 57.3, MSE 0.0227 (SIMPLE, Table 3)",
    ("simple", 1, 10): "P 47.2, MSE 0.0223 (SIMPLE, Table 3)",
    ("simple", 1, 15): "P 53.2, MSE 0.0320 (SIMPLE, Table 3)",
    ("simple", 2, 10): "P 44.8, MSE 0.0268 (SIMPLE, Table 2)",
    ("corr-topk", 0, 5): "P 85.1, MSE 0.025 (complex, Table 4)",
    ("corr-topk", 0, 10): "P 77.8, MSE 0.023 (complex, Table 4)",
    ("corr-topk", 0, 15): "P 74.5, MSE 0.022 (complex, Table 4)",
    ("corr-topk", 1, 5): "P 67.9, MSE 0.025 (complex, Table 3)",
    ("corr-topk", 1, 10): "P 60.2, MSE 0.023 (complex, Table 3)",
    ("corr-topk", 1, 15): "P 57.7, MSE 0.021 (complex, Table 3)",
    ("corr-topk", 2, 5): "P 60.4, MSE 0.028 (complex, Table 5)",
    ("corr-topk", 2, 10): "P 53.5, MSE 0.026 (complex, Table 5)",
    ("corr-topk", 2, 15): "P 46.8, MSE 0.026 (complex, Table 5)",
    ("topk", 0, 10): "P 72.9, MSE 0.024 (E.F. Ent., complex, Table 4)",
    ("topk", 1, 5): "P 59.5, MSE 0.026 (E.F. Ent., complex, Table 3)",
    ("topk", 1, 10): "P 54.6, MSE 0.023 (E.F. Ent., complex, Table 3)",
    ("topk", 1, 15): "P 44.9, MSE 0.022 (E.F. Ent., complex, Table 3)",
    ("topk", 2, 10): "P 48.1, MSE 0.027 (E.F. Ent., complex, Table 5)",
})

def sections() -> dict[str, Template]:
    """The template's sections by name: each runs from its line ``<!-- section: NAME -->`` to the
    next one (the text before the first is a note to the template's readers)."""
    _, *parts = re.split(r"^<!-- section: (\w+) -->\n", TEMPLATE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {name: Template(body) for name, body in zip(parts[::2], parts[1::2])}


def fmt_mean(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    values = [v * scale for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def pct(value: float | None) -> str:
    """A share in percent, "-" for none."""
    return "-" if value is None else f"{100 * value:.1f}"


def shown_target(runs: list[dict]) -> str:
    """The training target of a configuration's beer runs: k, or the selection rate held in
    training (and where the test reviews were decoded at it, over each review or over the
    corpus), or sparse attention's strength gamma; and the transition cost the test reviews
    were decoded with, if one was asked for (per half where it was cross-fitted, per run where
    the runs' choices differ, and the grid of costs the halves chose from)."""
    row = runs[0]
    decoded = f", decoded with coherence {row['test_coherence']:g}" if row.get("test_coherence") is not None else ""
    if row.get("coherence_cross_fit"):
        chosen = dict.fromkeys(" / ".join(f"{cost:g}" for cost in r["coherence_cross_fit"]["chosen"])
                               for r in runs if r.get("coherence_cross_fit"))
        costs = row["coherence_cross_fit"].get("costs")
        grid = f" over costs {min(costs):g}-{max(costs):g}" if costs else ""
        decoded = f", decoded with coherence {'; '.join(chosen)} cross-fit{grid}"
    if row.get("k"):
        return f"k={row['k']}{decoded}"
    if row.get("extractor") == "sparse-attention":  # no rate: its strength steers the size (default 1)
        gamma = re.search(r"--gamma (\S+)", row.get("script", ""))
        return f"gamma {gamma.group(1) if gamma else 1}"
    if not row.get("selection_target"):
        return "-"
    share = f"{100 * row['test_share']:.3g}%" if row.get("test_share") is not None else "it"
    over = f", test at {share} per {row['test_rate_over']}" if row.get("test_rate_over") else ""
    return f"{100 * row['selection_target']:.3g}%{over}{decoded}"


def load() -> list[dict]:
    """Every benchmark's rows, file by file (each in the order its runs appended them)."""
    return [json.loads(line) for path in sorted(RESULTS.glob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def options(text: str, leave_out: set[str]) -> list[str]:
    """A command line's words grouped per option (``--flag value ...``), in order, without
    the options named in ``leave_out``."""
    groups: list[list[str]] = []
    for word in shlex.split(text):
        if word.startswith("--") or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    return [" ".join(g) for g in groups if g[0] not in leave_out]


def run_device(row: dict) -> str:
    """The device a beer run trained on (rows from before the field was recorded ran on the CPU)."""
    return (row.get("device") or "cpu").replace("auto", "cpu")


NOT_CONFIGURATION = {"--seeds", "--time-limit", "--evaluate-only", "--data-dir", "--runs", "--k", "--device"}


def configuration(row: dict) -> str:
    """The benchmark command's options in a fixed order, without its seeds, time limit,
    ``--evaluate-only``, folders and train ``--k`` (k has its own column), and the device the
    run resolved to in place of the ``--device`` asked for: runs that differ only in seed group
    together (a time limit bounds the budget, not the model; notes say where one stopped), a
    run evaluated again later with the runs evaluated at once, and a run on the default device
    with one that named it."""
    command, _, train = row["script"].partition(" -- ")
    return " ".join([*sorted(options(command, NOT_CONFIGURATION)), "--", *sorted(options(train, NOT_CONFIGURATION)),
                     f"on {run_device(row)}"])


SHOWN_ELSEWHERE = {"--device", "--time-limit", "--encoder", "--embedding-dim", "--hidden-size", "--k", "--save-epochs"}


def setup(row: dict) -> str:
    """What sets a beer run's configuration apart: its epochs and the `rationale train` options
    after ``--``, less those shown in other columns (encoder, k) or that bound the run rather
    than the model (device, time limit)."""
    command, _, train = row.get("script", "").partition(" -- ")
    epochs = [o.split()[1] for o in options(command, set()) if o.startswith("--epochs ")]
    shown = " ".join(options(train, SHOWN_ELSEWHERE))
    return " ".join(filter(None, [f"{epochs[0]} epochs" if epochs else "", f"`{shown}`" if shown else ""]))


def beer_table(rows: list[dict]) -> list[str]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        key = (row["extractor"], row["encoder"], row["aspect"], row.get("selection_target"), row.get("k"),
               configuration(row))
        groups[key].append(row)
    lines = [
        "| extractor | encoder | aspect | target | setup | runs | train | vectors | test MSE | precision % | recall % | F1 % | selected % | support | train s | device | published |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2], str(k[3]), str(k[4]), k[5])):
        extractor, encoder, aspect, _, k, _ = key
        runs = groups[key]
        shown = f"{extractor} ({runs[0]['attention']})" if runs[0].get("attention") else extractor
        lines.append(
            f"| {shown} | {encoder} | {aspect} {ASPECTS.get(aspect, '')} | {shown_target(runs)} | {setup(runs[0])} "
            f"| {len(runs)} "
            f"| {runs[0]['train_size'] / 1000:.3g}k | {runs[0].get('vectors', 'glove 50d')} "
            f"| {fmt_mean([r['mse'] for r in runs], digits=4)} | {fmt_mean([r['precision'] for r in runs], 100)} "
            f"| {fmt_mean([r['recall'] for r in runs], 100)} | {fmt_mean([r['f1'] for r in runs], 100)} "
            f"| {fmt_mean([r['selection_rate'] for r in runs], 100)} | {fmt_mean([r.get('support') for r in runs])} "
            f"| {fmt_mean([r['train_seconds'] for r in runs], digits=0)} "
            f"| {run_device(runs[0])} "
            f"| {PUBLISHED.get((extractor, aspect, k)) or PUBLISHED.get((extractor, aspect), '-')} |"
        )
    return lines


def timing_section(prose: dict[str, Template], rows: list[dict], benchmark: str, columns: list[str],
                   cells) -> str:
    """The section of one benchmark's rows: its prose and a table whose last column is the
    command with its commit (nothing when the benchmark has no rows)."""
    chosen = [r for r in rows if r.get("benchmark") == benchmark]
    if not chosen:
        return ""
    lines = ["| " + " | ".join([*columns, "command"]) + " |", "|" + "---|" * (len(columns) + 1)]
    for r in chosen:
        lines.append("| " + " | ".join(str(c) for c in cells(r)) + f" | `{r['command']}` ({r['commit']}) |")
    return prose[benchmark].substitute(table="\n".join(lines))


PROTOCOL_VECTORS = "beer-word2vec 200d"
PROTOCOL_RATES = {0: 0.13, 1: 0.07, 2: 0.07}  # the selection rates compared at, per aspect


def published_precision(extractor: str, aspect: int, k: int | None) -> float | None:
    text = PUBLISHED.get((extractor, aspect, k)) or PUBLISHED.get((extractor, aspect)) or ""
    match = re.search(r"P (\d+(?:\.\d+)?)", text)
    return float(match.group(1)) if match else None


def passed_over(groups: dict[tuple, list[dict]]) -> set[tuple]:
    """The configurations (groups of runs) of a hyperparameter search (``beer.py --search``) that
    are not its choice per extractor and aspect, the lowest mean validation MSE."""
    searches: dict[tuple, list[tuple]] = defaultdict(list)
    for key, runs in groups.items():
        if runs[0].get("search"):
            if any(r.get("valid_mse") is None for r in runs):
                raise ValueError(f"search {runs[0]['search']}: a run without valid_mse ({runs[0]['command'][:80]})")
            searches[(runs[0]["search"], key[0], key[1])].append(key)
    left = set()
    for keys in searches.values():
        pick = min(keys, key=lambda k: statistics.mean(r["valid_mse"] for r in groups[k]))
        left.update(key for key in keys if key != pick)
    return left


def searched_text(row: dict, groups: dict[tuple, list[dict]]) -> str:
    """How a configuration chosen in a search was chosen, for the summary's setup column."""
    if not row.get("search"):
        return ""
    size = sum(1 for runs in groups.values() if runs[0].get("search") == row["search"]
               and (runs[0]["extractor"], runs[0]["aspect"]) == (row["extractor"], row["aspect"]))
    return f", the lowest validation MSE of {size} configurations (search {row['search']})"


def widened(rows: list[dict]) -> set[int]:
    """The ``id`` of each row whose run was cross-fitted again later over a wider grid of costs (a
    superset of its own) with the same test decoding: only the widest grid's row competes in the
    summary, since choosing between grids by their test precision would not be blind. A row
    whose command trained (no ``--evaluate-only``) starts a new model in its folder."""
    grids: dict[tuple, list[tuple[int, set[float]]]] = defaultdict(list)
    trained: dict[str, int] = {}
    for number, row in enumerate(rows):
        match = re.search(r"--out (\S+)", row.get("command", ""))
        if not match:
            continue
        folder = match.group(1)
        if "--evaluate-only" not in row.get("script", ""):
            trained[folder] = number
        if row.get("coherence_cross_fit"):
            key = (folder, trained.get(folder), row.get("test_rate_over"), row.get("test_share"))
            grids[key].append((id(row), set(row["coherence_cross_fit"]["costs"])))
    return {row for runs in grids.values() for row, costs in runs if any(costs < other for _, other in runs)}


def summary_table(rows: list[dict]) -> list[str]:
    """Per extractor and aspect, the most precise configuration (mean over its runs) trained
    on the aspect's own 9,000 reviews, under the protocol's beer vectors where such runs exist
    (else the best with other vectors, marked), and for rate extractors selecting within 1
    point of the protocol's rate where such runs exist, beside the published precision. Rows
    decoded with a cost chosen on their own test reviews are left out: they are not blind, and
    of a hyperparameter search only the configuration chosen on validation competes, and of a
    run cross-fitted over several grids of costs only the widest grid."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    narrower = widened(rows)
    for row in rows:
        if (row.get("train_size") == 9000 and row["extractor"] != "full" and row.get("test_coherence") is None
                and id(row) not in narrower):
            key = (row["extractor"], row["aspect"], row.get("selection_target"), row.get("k"),
                   configuration(row))
            groups[key].append(row)
    left_out = passed_over(groups)
    best: dict[tuple, tuple[tuple, list[dict]]] = {}
    for key, runs in groups.items():
        extractor, aspect, target, *_ = key
        if key in left_out:
            continue
        protocol = runs[0].get("vectors") == PROTOCOL_VECTORS
        # a rate extractor's precision at the protocol's rate, not at a smaller one
        at_rate = not target or abs(statistics.mean(r["selection_rate"] for r in runs) - PROTOCOL_RATES[aspect]) <= 0.01
        rank = (protocol, at_rate, statistics.mean(r["precision"] for r in runs))
        if (extractor, aspect) not in best or rank > best[(extractor, aspect)][0]:
            best[(extractor, aspect)] = (rank, runs)
    lines = ["| extractor | aspect | target | encoder | setup | vectors | runs | precision % | recall % | F1 % "
             "| selected % | test MSE | published P | gap (points) |", "|" + "---|" * 14]
    for (extractor, aspect), ((protocol, *_), runs) in sorted(best.items()):
        published = published_precision(extractor, aspect, runs[0].get("k"))
        precision = 100 * statistics.mean(r["precision"] for r in runs)
        vectors = runs[0].get("vectors", "glove 50d") + ("" if protocol else " (not the protocol's)")
        lines.append(
            f"| {extractor} | {aspect} {ASPECTS.get(aspect, '')} | {shown_target(runs)} | {runs[0]['encoder']} "
            f"| {setup(runs[0])}{searched_text(runs[0], groups)} | {vectors} | {len(runs)} "
            f"| {fmt_mean([r['precision'] for r in runs], 100)} | {fmt_mean([r['recall'] for r in runs], 100)} "
            f"| {fmt_mean([r['f1'] for r in runs], 100)} | {fmt_mean([r['selection_rate'] for r in runs], 100)} "
            f"| {fmt_mean([r['mse'] for r in runs], digits=4)} | {published if published is not None else '-'} "
            f"| {f'{precision - published:+.1f}' if published is not None else '-'} |")
    return lines


def keep_rule_section(prose: dict[str, Template], rows: list[dict]) -> str:
    """The epoch each keep rule chose in runs that saved every epoch, and its test rationales."""
    chosen = [r for r in rows if r.get("benchmark") == "keep_rule"]
    if not chosen:
        return ""
    lines = []
    for r in chosen:
        near = [c for c in r["curve"] if c["precision"] is not None and abs(c["selection_rate"] - r["target"]) <= 0.02]
        top = max(near, key=lambda c: c["precision"]) if near else None
        shown_top = f"{top['epoch']} ({pct(top['precision'])})" if top else "-"
        for c in r["choices"]:
            rule = c["rule"] if c["tolerance"] is None else f"{c['rule']} ±{100 * c['tolerance']:g} pts"
            lines.append(f"| {r['run']} | {r['extractor']}{' (dependent)' if r.get('dependent') else ''} "
                         f"| {r['aspect']} | {100 * r['target']:g}% | {r['rate_over']} | {rule} | {c['epoch']} "
                         f"| {pct(c['precision'])} | {pct(c['selection_rate'])} | {shown_top} |")
    notes = "\n".join(sorted({f"- {r['run']}: {r['note']}." for r in chosen if r.get("note")}))
    return prose["keep_rule"].substitute(rows="\n".join(lines), notes=f"\n\n{notes}" if notes else "",
                                         commands="\n".join(f"- `{r['command']}` ({r['commit']})" for r in chosen))


def beer_sections(prose: dict[str, Template], beer: list[dict]) -> str:
    """The beer summary, the table of every configuration, notes on runs and the commands."""
    if not beer:
        return ""
    out = prose["beer"].substitute(protocol_vectors=PROTOCOL_VECTORS, summary_table="\n".join(summary_table(beer)),
                                   beer_table="\n".join(beer_table(beer)))
    notes = [f"- {r['extractor']}, aspect {r['aspect']}, target {shown_target([r])}, seed {r['seed']}: {r['note']}."
             for r in beer if r.get("note")]
    if notes:
        out += prose["beer_notes"].substitute(notes="\n".join(notes))
    commands, seen = [], set()
    for row in beer:
        key = (row.get("k"), configuration(row))
        if key not in seen:
            seen.add(key)
            commands.append(f"- `{row['script']}` (commit {row['commit']})")
    return out + prose["beer_commands"].substitute(commands="\n".join(commands))


def write_report() -> None:
    rows = load()
    prose = sections()
    out = [prose["header"].substitute(), beer_sections(prose, [r for r in rows if r.get("benchmark") == "beer"]),
           keep_rule_section(prose, rows)]
    out.append(timing_section(
        prose, rows, "demo_budget",
        ["extractor", "budget", "options", "epochs", "precision %", "recall %", "selected %", "transitions / doc",
         "test MSE", "train s"],
        lambda r: [r["extractor"], r["budget"] or "-", r.get("options") or "-", r["epochs"], f"{100 * r['precision']:.1f}",
                   f"{100 * r['recall']:.1f}", f"{100 * r['selection_rate']:.1f}", f"{r['transitions']:.1f}",
                   f"{r['mse']:.4f}", f"{r['train_seconds']:.0f}"]))
    out.append(timing_section(
        prose, rows, "demo_defaults",
        ["extractor", "encoder", "budget", "epochs", "precision %", "recall %", "selected %", "spans / doc",
         "train s"],
        lambda r: [r["extractor"], r.get("encoder") or "-", r["budget"] or "-", r["epochs"],
                   f"{100 * r['precision']:.1f}", f"{100 * r['recall']:.1f}", f"{100 * r['selection_rate']:.1f}",
                   f"{r['spans']:.1f}" if r.get("spans") is not None else "-", f"{r['train_seconds']:.0f}"]))
    out.append(timing_section(
        prose, rows, "leakage",
        ["run", "extractor", "selector / predictor encoder", "selected %", "trained on", "probe", "chance"],
        lambda r: [Path(r["run"]).name + f" on {Path(r['data']).name}", r["extractor"],
                   f"{r['selector_encoder']} / {r['predictor_encoder']}", pct(r["selection_rate"]),
                   f"{r['documents']:,}", f"{r['probe']:.3f} ({r['measure']})", f"{r['chance']:.3f}"]))
    out.append(timing_section(
        prose, rows, "step_cost",
        ["variant", "encoder", "B x T", "device", "threads", "ms / step", "x full"],
        lambda r: [r["variant"], r["encoder"], f"{r['batch']} x {'/'.join(map(str, r.get('batches', [r['length']])))}",
                   r["device"], r["threads"],
                   f"{r['ms']:.0f}", f"{r['ratio_to_full']:.2f}" if r.get("ratio_to_full") else "-"]))
    out.append(timing_section(
        prose, rows, "relaxation_speed",
        ["relaxation", "backward", "B x n, k", "device", "threads", "ms", "x topk exact"],
        lambda r: [r["variant"], r["method"], f"{r['batch']} x {r['length']}, {r['k']}", r["device"], r["threads"],
                   f"{r['ms']:.1f}", f"{r['ratio_to_topk_exact']:.2f}"]))
    out.append(timing_section(
        prose, rows, "ksubset_speed",
        ["program", "device", "threads", "ms", "x faster than straightforward"],
        lambda r: [r["variant"], r["device"], r["threads"], f"{r['ms']:.1f}", f"{r['speedup_vs_straightforward']:.2f}"]))
    out.append(timing_section(
        prose, rows, "oracle_speed",
        ["program", "B x T", "device", "threads", "ms", "x max"],
        lambda r: [r["variant"], f"{r['batch']} x {r['length']}", r["device"], r["threads"], f"{r['ms']:.1f}",
                   f"{r['ratio_to_max']:.2f}"]))
    out.append(timing_section(
        prose, rows, "bernoulli_variance",
        ["baseline", "penalties", "sparsity", "samples / document", "batch", "draws", "total variance", "x none",
         "cosine of means to none"],
        lambda r: [r["baseline"], r.get("penalty", "sampled"), r.get("sparsity", 0.0003), r["samples"], r["batch"],
                   r["draws"], f"{r['total_variance']:.4g}",
                   f"{r['ratio_to_none']:.3f}", f"{r['mean_cosine_to_none']:.3f}"]))
    out.append(timing_section(
        prose, rows, "predict_speed",
        ["variant", "encoder", "emb / hidden", "trained on", "input", "documents", "threads x processes", "selected",
         "docs / s", "peak MB"],
        lambda r: [r["variant"] + (f" ({r['baseline']})" if r.get("baseline") else ""), r["encoder"],
                   f"{r.get('embedding_dim', 200)} / {r.get('hidden_size', 200)}", r.get("trained_on", "beer"),
                   r.get("input", "tokens"), f"{r['documents']:,}",
                   f"{r['threads']} x {r.get('workers', 1)}",
                   "" if r.get("selected") is None else f"{100 * r['selected']:.1f}%",
                   f"{r['docs_per_s']:,.0f}", f"{r['peak_mb']:,.0f}"]))
    out.append(timing_section(
        prose, rows, "train_speed",
        ["extractor", "commit", "CPU", "embeddings", "reviews", "s / epoch", "reviews / s", "x baseline", "peak GB"],
        lambda r: [r["extractor"], r["commit"] + (f" (against {r['baseline']})" if r.get("baseline") else ""),
                   r.get("cpu", "AMD EPYC"), r.get("embeddings", "random (trained)"), f"{r['reviews']:,}", " / ".join(f"{s:.1f}" for s in r["epoch_seconds"]),
                   f"{r['reviews_per_second']:.1f}", f"{r['speedup']:.2f}" if r.get("speedup") else "-",
                   f"{r['peak_gb']:.2f}"]))
    out.append(eraser_section(prose, rows))
    out.append(timing_section(
        prose, rows, "eraser_fresh",
        ["support run, vectors", "rate", "decoding (validation loss of each tried)", "accuracy", "support's accuracy",
         "spans / doc", "precision %", "token F1 micro / macro", "IOU F1 micro / macro"],
        lambda r: [f"{r['support_extractor']} {r['support_encoder']}, {r.get('vectors', 'glove 50d')}", r["rate"],
                   f"{fresh_choice(r)} ({', '.join(f'{c}: {v:.3f}' for c, v in r['validation_loss'].items())})",
                   pct(r["accuracy"]), pct(r["support_accuracy"]), f"{r['spans']:.1f}", pct(r["precision"]),
                   f"{r['token_f1_micro']:.3f} / {r['token_f1_macro']:.3f}",
                   f"{r['iou_f1_micro']:.3f} / {r['iou_f1_macro']:.3f}"]))
    out.append(timing_section(
        prose, rows, "eraser_support",
        ["support", "predictor", "decoding (validation loss of each tried)", "accuracy", "reference", "difference",
         "selected %", "token F1 micro / macro", "IOU F1 micro / macro", "seed", "train s"],
        lambda r: [f"{r['extractor']} {r['encoder']}, budget {r['budget']}", r["predictor_encoder"] + (f", lr {r['lr']:g}" if r.get("lr") else "")
                   + (f", on {r['device']}" if r.get("device", "cpu") != "cpu" else ""),
                   f"{r['decoding']} ({', '.join(f'{c}: {v:.3f}' for c, v in r['validation_loss'].items())})",
                   pct(r["accuracy"]), pct(r["reference_accuracy"]) if r["reference_accuracy"] is not None else "-",
                   f"{100 * (r['accuracy'] - r['reference_accuracy']):+.1f}" if r["reference_accuracy"] is not None
                   else "-", pct(r["selection_rate"]), f"{r['token_f1_micro']:.3f} / {r['token_f1_macro']:.3f}",
                   f"{r['iou_f1_micro']:.3f} / {r['iou_f1_macro']:.3f}", r["seed"], f"{r['train_seconds']:.0f}"]))
    out.append(timing_section(
        prose, rows, "reference_saliency",
        ["dataset", "predictor (chosen on validation)", "budget, window", "validation (accuracy % or MSE)", "test",
         "full-text reference",
         "difference", "selected %", "precision %", "token F1 micro / macro", "IOU F1 micro / macro"],
        lambda r: [r["dataset"], r["predictor"], f"{r['budget']:g}, {r['window']}"
                   + (", sentences" if r["sentences"] else ""), metric_value(r, r[f"valid_{r['metric']}"]),
                   metric_value(r, r[r["metric"]]), metric_value(r, r[f"reference_{r['metric']}"]),
                   metric_value(r, r["difference"], signed=True), pct(r["selection_rate"]),
                   pct(r["precision"]) if "precision" in r else "-",
                   f"{r['token_f1_micro']:.3f} / {r['token_f1_macro']:.3f}",
                   f"{r['iou_f1_micro']:.3f} / {r['iou_f1_macro']:.3f}"]))
    out.append(timing_section(
        prose, rows, "beer_binary",
        ["aspect", "extractor, encoder", "remedy", "train reviews", "seed", "valid acc % (or MSE)", "decoding",
         "selected %", "P %", "R %", "F1 %", "acc % (or MSE)", "reference acc % (or MSE)"],
        lambda r: [r["aspect"], f"{r['extractor']}{variant(r)}, {r['encoder']}", remedy(r), train_reviews(r),
                   r["seed"], binary_task(r, "valid_"), r.get("decoding", "own"),
                   *(pct(r[key]) if r[key] is not None else "not tested"
                     for key in ("selection_rate", "precision", "recall", "f1")),
                   binary_task(r), binary_task(r, "reference_")]))
    out.append(timing_section(
        prose, rows, "beer_shift",
        ["aspect", "rating variance, heldout / test", "correlation with the other ratings, heldout / test",
         "reference", "test MSE, whole reviews", "annotated reviews", "without their annotation", "training mean"],
        lambda r: [r["aspect"], " / ".join(f"{r['labels'][s]['variance']:.4f}" for s in ("heldout", "test")),
                   " / ".join(others(r["labels"][s]["correlation"], r["aspect"]) for s in ("heldout", "test")),
                   r["setting"], *(f"{r['test_mse'][k]:.4f}" for k in ("full_text", "full_text_annotated",
                                                                        "without_annotation", "training_mean"))]))
    # each section ends in a blank line; the file in one newline
    REPORT.write_text("".join(out).rstrip("\n") + "\n")


def others(correlations: list[float], aspect: int) -> str:
    """An aspect's correlations with the other ratings, as their range."""
    rest = [c for i, c in enumerate(correlations) if i != aspect]
    return f"{min(rest):.2f}-{max(rest):.2f}"


def binary_task(row: dict, prefix: str = "") -> str:
    """A beer_binary row's task figure: accuracy in points, or MSE for a run trained on the ratings;
    on validation, that of the decoding the row chose where it records each one's."""
    metric = "mse" if row.get("labels") == "score" else "accuracy"
    chosen = (row.get("valid_by_decoding") or {}).get(row.get("decoding", "own"), {}) if prefix == "valid_" else {}
    value = chosen.get(metric, row.get(prefix + metric))
    if value is None:
        return "not tested" if prefix == "" else "-"
    return pct(value) if metric == "accuracy" else f"{value:.4f}"


def train_reviews(row: dict) -> str:
    """A beer_binary row's training reviews: how many, every one (not balanced; each epoch balanced
    with ``--balance-classes``), how many negative where a balanced run's classes are not even (an
    early ``--train-size``), and whether ratings."""
    negatives = (row.get("negatives") or {}).get("train")
    uneven = row["balanced"] and negatives is not None and 2 * negatives != row["sizes"]["train"]
    every = " (all, balanced epochs)" if row.get("balance_classes") else " (all)"
    return (f"{row['sizes']['train']:,}" + ("" if row["balanced"] else every)
            + (f" ({negatives:,} negative)" if uneven else "")
            + (", their ratings" if row.get("labels") == "score" else ""))


def variant(row: dict) -> str:
    """A row's gradient estimator where it is not REINFORCE (Bernoulli) and its augmented-Lagrangian
    weight where it is not the extractor's default, in parentheses."""
    parts = [row["estimator"]] if row.get("estimator", "reinforce") != "reinforce" else []
    rho = row.get("lagrange_rho")
    if rho is not None and rho != selector_class(row["extractor"]).Options().lagrange_rho:
        parts.append(f"--lagrange-rho {rho:g}")
    return f" ({', '.join(parts)})" if parts else ""


def remedy(row: dict) -> str:
    """The remedies against degeneration a beer_binary row's run used, by their options."""
    used = row.get("remedies") or {}
    names = []
    if used.get("share_encoder"):
        names.append("FR")
    if (used.get("generators") or 1) > 1:
        names.append(f"MGR x{used['generators']}")
    if used.get("guidance"):
        names.append(f"MCD {used['guidance']:g}" + (", separated" if used.get("separate_guidance") else ""))
    if used.get("predictor_lr") not in (None, 1.0):
        names.append(f"DR {used['predictor_lr']:g}")
    return ", ".join(names) or "none"


def metric_value(row: dict, value: float, signed: bool = False) -> str:
    """A value of the row's task metric: accuracy in points, MSE as it is."""
    if row["metric"] == "mse":
        return f"{value:+.4f}" if signed else f"{value:.4f}"
    return f"{100 * value:+.1f}" if signed else pct(value)


def fresh_choice(row: dict) -> str:
    """The decoding an eraser_fresh row chose: whole sentences, or a transition cost."""
    return "sentences" if row.get("sentences") else f"cost {row['coherence']:g}"


def eraser_section(prose: dict[str, Template], rows: list[dict]) -> str:
    """ERASER movies: every metric of each run, and how closely our scorer agrees."""
    chosen = [r for r in rows if r.get("benchmark") == "eraser"]
    if not chosen:
        return ""

    def num(x, digits=3):
        return "-" if x is None else f"{x:.{digits}f}"

    def decoded(r):
        """The test-time decoding, and the cost chosen on validation among those tried."""
        chosen = r.get("validation") or {}
        tried = ", ".join(chosen.get("validation_loss", {}))
        return (r.get("decoding") or "own") + (f" (cost chosen on validation among {tried})" if tried else "")

    def encoders(r):
        """The encoder, and the predictor's where it differs."""
        predictor = r.get("predictor_encoder")
        return r["encoder"] + (f" (predictor {predictor})" if predictor not in (None, r["encoder"]) else "")

    def accuracy(r):
        """Accuracy, then the majority class's and the full-text reference's where the row has it."""
        reference = r.get("reference_accuracy")
        return (f"{pct(r['accuracy'])} ({pct(r['majority_accuracy'])}"
                + (f"; reference {pct(reference)})" if reference is not None else ")"))
    lines = []
    for r in chosen:
        lines.append(
            f"| {r['extractor']} | {encoders(r)}, {r.get('vectors', 'glove 50d')} | {r['budget'] or '-'} "
            f"| {r['epochs']} | {decoded(r)} "
            f"| {accuracy(r)} | {pct(r['selection_rate'])} "
            f"| {num(r.get('spans'), 1)} | {pct(r['gold_share'])} | {pct(r['precision'])} "
            f"| {num(r['token_f1_micro'])} / {num(r['token_f1_macro'])} "
            f"| {num(r['iou_f1_micro'])} / {num(r['iou_f1_macro'])} | {num(r['span_f1'])} "
            f"| {num(r['auprc'])} | {num(r['average_precision'])} | {num(r['roc_auc'])} "
            f"| {num(r['comprehensiveness'])} | {num(r['sufficiency'])} | {num(r['comprehensiveness_aopc'])} "
            f"| {num(r['sufficiency_aopc'])} | {num(r['predictor_on_rationale'])} "
            f"| {num(r['predictor_on_complement'])} |")
    checks = []
    for r in chosen:
        for name, check in r["checks"].items():
            missing = f", keys missing: {', '.join(check['missing'])}" if check["missing"] else ""
            checks.append(f"- {r['extractor']}, {name.replace('_', ' ')}: {check['values']} values, largest "
                          f"difference {check['max_abs_diff']:.1e}{missing}")
    commands = sorted({f"- `{r['script']}` (commit {r['commit']}); train: `{r['command']}`" for r in chosen})
    return prose["eraser"].substitute(rows="\n".join(lines), checks="\n".join(checks), commands="\n".join(commands))


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    write_report()
