"""The leakage probe: a model of the masks' 0/1 pattern alone, beside chance."""

from types import SimpleNamespace

import torch

from rationale_cli.data.records import Record
from rationale_cli.data.vocab import Vocab
from rationale_cli.evaluation.leakage import leakage_probe
from rationale_cli.runs.task import Classification


class Placed(torch.nn.Module):
    """Selects three tokens: at the front when the text has 'good' (anywhere), else in the middle
    (``telling``), or always at the front."""

    def __init__(self, good: int, telling: bool):
        super().__init__()
        self.good, self.telling = good, telling

    def decode(self, ids, mask, visible=None, decoding=None):
        z = torch.zeros_like(mask)
        has = (ids == self.good).any(1) if self.telling else torch.ones(len(ids), dtype=torch.bool)
        z[has, :3] = 1.0
        z[~has, 5:8] = 1.0
        return z, z, torch.zeros(len(ids), 2)


def documents(n, seed):
    rng = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        words = ["the", "beer", "is", "dark", "and", "thick", "with", "a", "tan", "head", "ok", "fine"]
        positive = i % 2 == 0
        if positive:
            words[int(torch.randint(12, (1,), generator=rng))] = "good"
        out.append(Record(f"d{i}", words, "POS" if positive else "NEG"))
    return out


def test_the_probe_finds_a_label_in_the_masks_shape_and_none_where_there_is_none():
    train, test = documents(200, 0), documents(60, 1)
    vocab = Vocab.build([r.tokens for r in train])
    task = Classification(["NEG", "POS"])
    for telling, low, high in ((True, 0.95, 1.0), (False, 0.0, 0.5)):
        run = SimpleNamespace(model=Placed(vocab.stoi["good"], telling), vocab=vocab, task=task)
        scores = leakage_probe(run, train, test, batch_size=32, device="cpu")
        assert scores["leakage_majority_accuracy"] == 0.5 and scores["leakage_documents"] == 200
        assert low <= scores["leakage_accuracy"] <= high, (telling, scores)


def test_score_probes_a_files_masks_cross_fitted(tmp_path):
    """`rationale score --leakage-probe`: masks that place the rationale by label are found out;
    masks placed at random are not."""
    import json
    import random

    from typer.testing import CliRunner

    from rationale_cli.cli import app

    rng = random.Random(0)
    gold = [{"id": f"d{i}", "tokens": ["w"] * 12, "label": "POS" if i % 2 else "NEG"} for i in range(120)]
    (tmp_path / "gold.jsonl").write_text("".join(json.dumps(row) + "\n" for row in gold))
    accuracy = {}
    for name, place in (("telling", lambda i: 0 if i % 2 else 5), ("random", lambda i: rng.choice([0, 5]))):
        lines = [{"id": f"d{i}", "rationale": [[start, start + 3]]} for i, start in enumerate(map(place, range(120)))]
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        result = CliRunner().invoke(app, ["score", str(tmp_path / f"{name}.jsonl"), str(tmp_path / "gold.jsonl"),
                                          "--leakage-probe", "--json", str(tmp_path / f"{name}.json")])
        assert result.exit_code == 0, result.output
        scores = json.loads((tmp_path / f"{name}.json").read_text())
        assert scores["leakage_documents"] == 96 and 0.4 <= scores["leakage_majority_accuracy"] <= 0.6
        accuracy[name] = scores["leakage_accuracy"]
    assert accuracy["telling"] >= 0.95 and accuracy["random"] <= 0.7, accuracy
