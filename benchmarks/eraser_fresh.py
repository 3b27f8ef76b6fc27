"""ERASER movies, select then predict anew (FRESH: Jain et al., 2020, "Learning to Faithfully
Rationalize by Construction", section 3): a trained run's rationales become the only text a new
model reads.

For each cost of ``--costs`` (and, with ``--sentences``, whole sentences), the run in
``--support`` decodes the train and val splits at ``--rate`` with that cost per transition
(``--coherence``, :mod:`rationale_cli.models.coherent`: the same tokens per document, placed in runs) or in
the sentences that hold them (``--sentences``); a full-text model with the same encoder and
vectors is trained on the train split's rationales alone (the selected words, in order, gaps
closed) and validated on the val split's. The decoding of lowest validation loss of that new
model is chosen (gold rationales play no part); only then is the test split decoded that way,
the new model tested once on its rationales, and the run's test rationales scored with ERASER's
metrics (``rationale evaluate``).
One row per support run (``benchmark: eraser_fresh``) in benchmarks/results/; RESULTS.md is
regenerated.

    python benchmarks/eraser_fresh.py --support RUN --rate 0.2 --costs 0 0.3 1 2 --sentences -- --epochs 20
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import append_result, git_commit, invocation, movies_inputs, rationale, runs_folder, vectors_name
from report import write_report

import rationale_cli as rationale_api
from rationale_cli.data.readers import read_records
from rationale_cli.models.decoding import Decoding


def write_rationales(model, data: Path, split: str, decoding: Decoding, out: Path) -> float:
    """The split's documents reduced to their decoded rationales (JSON lines with ``tokens``
    and ``label``); returns the share of tokens kept."""
    records = list(read_records(data, split=split))
    kept = total = 0
    with open(out, "w", encoding="utf-8") as handle:
        for record, result in zip(records, model.predict(records, decoding=decoding)):
            tokens = [token for token, chosen in zip(record.tokens, result.selected) if chosen]
            kept, total = kept + len(tokens), total + len(record.tokens)
            # a document must keep a token to be read: an empty rationale becomes its first word
            handle.write(json.dumps({"id": record.id, "tokens": tokens or record.tokens[:1],
                                     "label": record.label}) + "\n")
    return kept / max(total, 1)


def folder_name(candidate: str) -> str:
    """``sentences``, or ``cost-C`` for a transition cost."""
    return candidate if candidate == "sentences" else f"cost-{candidate}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--support", type=Path, required=True, help="a trained run on ERASER movies")
    parser.add_argument("--data-dir", default="../shared/data", help="folder holding eraser_movies/ and glove_6B_50d_subset/")
    parser.add_argument("--rate", default="0.2", help="each document's rationale size (--rate)")
    parser.add_argument("--costs", type=float, nargs="*", default=[0.0, 0.3, 1.0, 2.0],
                        help="transition costs to try (none: only --sentences)")
    parser.add_argument("--sentences", action="store_true", help="also try whole sentences (--sentences)")
    parser.add_argument("--vectors", type=Path, default=None, help="the new model's word vectors (default: the "
                        "GloVe 6B 50-d subset)")
    parser.add_argument("--encoder", default="cnn", help="the new model's encoder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", default=None, help="keep the new runs here (default: a temporary folder)")
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="after --: options for the new model's training")
    args = parser.parse_args()
    extra = [a for a in args.train_args if a != "--"]
    data, vectors = movies_inputs(args.data_dir, args.vectors)
    runs = runs_folder(args.runs, "eraser-fresh-")
    support = rationale_api.load(args.support, device="cpu")
    candidates = {f"{cost:g}": Decoding(rate=args.rate, coherence=cost) for cost in args.costs}
    if args.sentences:
        candidates["sentences"] = Decoding(rate=args.rate, sentences=True)
    if not candidates:
        parser.error("nothing to try: give --costs or --sentences")
    tried = {}
    for name, decoding in candidates.items():
        folder = runs / folder_name(name)
        folder.mkdir(parents=True, exist_ok=True)
        shares = {split: write_rationales(support, data, split, decoding, folder / f"{split}.jsonl")
                  for split in ("train", "val")}
        command, seconds = rationale("train", "--data", str(folder / "train.jsonl"), "--valid", str(folder / "val.jsonl"),
                                     "--extractor", "full", "--encoder", args.encoder, "--embeddings", str(vectors),
                                     "--seed", str(args.seed), "--out", str(folder / "run"), "--force", *extra)
        rationale("evaluate", str(folder / "run"), str(folder / "val.jsonl"), "--no-faithfulness",
                  "--json", str(folder / "val.json"))
        tried[name] = {"validation_loss": json.loads((folder / "val.json").read_text())["loss"], "shares": shares,
                       "command": command, "train_seconds": round(seconds, 1)}
    best = min(candidates, key=lambda name: tried[name]["validation_loss"])
    folder = runs / folder_name(best)
    chosen = ["--sentences"] if best == "sentences" else ["--coherence", best]
    # the test split, once: the chosen decoding's rationales, the new model on them, the support's scores
    tried[best]["shares"]["test"] = write_rationales(support, data, "test", candidates[best], folder / "test.jsonl")
    rationale("evaluate", str(folder / "run"), str(folder / "test.jsonl"), "--no-faithfulness",
              "--json", str(folder / "test.json"))
    rationale("evaluate", str(args.support), str(data), "--no-faithfulness", "--rate", args.rate, *chosen,
              "--json", str(folder / "support.test.json"))
    test, selected = json.loads((folder / "test.json").read_text()), json.loads((folder / "support.test.json").read_text())
    eraser = selected["eraser"]  # ERASER's scores, as `rationale score` gives them (eraser.py checks the two agree)
    config = json.loads((args.support / "config.json").read_text())
    append_result({
        "benchmark": "eraser_fresh", "dataset": "movies", "support": str(args.support),
        "support_extractor": config["extractor"], "support_encoder": config["encoder"], "encoder": args.encoder,
        "extractor": config["extractor"], "predictor_encoder": args.encoder,
        "vectors": vectors_name(vectors),
        "rate": args.rate, "coherence": None if best == "sentences" else float(best), "sentences": best == "sentences",
        "chosen_on": "validation", "validation_loss": {name: tried[name]["validation_loss"] for name in candidates},
        "shares": tried[best]["shares"],
        "accuracy": test["accuracy"], "support_accuracy": selected["accuracy"],
        # the support run's full-text reference, on the same test documents
        "reference_accuracy": selected.get("full_text_reference", {}).get("value"),
        "selection_rate": selected["selection_rate"], "spans": selected["spans"], "precision": selected["precision"],
        "token_f1_micro": eraser["token_prf"]["instance_micro"]["f1"],
        "token_f1_macro": eraser["token_prf"]["instance_macro"]["f1"],
        "iou_f1_micro": eraser["iou_scores"][0]["micro"]["f1"], "iou_f1_macro": eraser["iou_scores"][0]["macro"]["f1"],
        "seed": args.seed, "command": tried[best]["command"], "train_seconds": tried[best]["train_seconds"],
        "script": invocation(), "commit": git_commit(),
    })
    print(f"{folder_name(best)} chosen on validation: accuracy {test['accuracy']:.3f} (full-text reference "
          f"{selected.get('full_text_reference', {}).get('value')}), IOU F1 "
          f"{eraser['iou_scores'][0]['micro']['f1']:.3f}, token F1 {eraser['token_prf']['instance_micro']['f1']:.3f}")
    write_report()


if __name__ == "__main__":
    main()
