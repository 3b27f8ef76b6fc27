"""The synthetic multi-aspect review corpus behind ``rationale demo`` and ``--data demo``.

Generated from a seed by our own code, so the gold rationale is known by
construction. Each review has one sentence per aspect (appearance, aroma,
palate) in shuffled order, each with two clauses ("the color was good and the
head seemed quite superb .") whose sentiment words come from five grades, plus
neutral distractor sentences. The score of the *target* aspect is the mean of
its two clauses' grades (/ 4, small noise, clipped to [0, 1]); the other
aspects' grades are drawn independently, so a model must read both clauses of
the target aspect's sentence to predict well. The gold rationale is that sentence.
"""

from __future__ import annotations

import random

from rationale_cli.data.records import Record

ASPECTS = ("appearance", "aroma", "palate")

NOUNS = {
    "appearance": ["the color", "the head", "the pour", "the look", "its lacing"],
    "aroma": ["the smell", "the nose", "the aroma", "its scent", "the bouquet"],
    "palate": ["the mouthfeel", "the body", "the palate", "its carbonation", "the texture"],
}

GRADES = [
    ["awful", "horrible", "disgusting", "terrible"],
    ["weak", "dull", "poor", "thin"],
    ["okay", "average", "decent", "passable"],
    ["good", "nice", "pleasant", "solid"],
    ["wonderful", "superb", "excellent", "outstanding"],
]

LINKS = ["is", "was", "seemed", "felt"]
ADVERBS = ["", "really", "quite", "truly", "rather"]

DISTRACTORS = [
    "i bought this bottle at a shop downtown",
    "we shared it with friends after dinner last week",
    "poured from a bottle into a tulip glass",
    "the label shows a small boat on a lake",
    "it came in a four pack for a fair price",
    "my brother recommended this one to me",
    "served slightly chilled on a rainy evening",
    "the brewery is a few miles from my house",
]

SPLITS = {"train": (0, 2000), "valid": (1, 300), "test": (2, 300)}


def clause(noun: str, grade: int, rng: random.Random) -> list[str]:
    words = [*noun.split(), rng.choice(LINKS)]
    adverb = rng.choice(ADVERBS)
    if adverb:
        words.append(adverb)
    return words + [rng.choice(GRADES[grade])]


def aspect_sentence(aspect: str, grades: tuple[int, int], rng: random.Random) -> list[str]:
    first, second = rng.sample(NOUNS[aspect], 2)
    return clause(first, grades[0], rng) + ["and"] + clause(second, grades[1], rng) + ["."]


def review(index: int, aspect: int, rng: random.Random) -> Record:
    grades = [(rng.randrange(len(GRADES)), rng.randrange(len(GRADES))) for _ in ASPECTS]
    sentences = [(a, aspect_sentence(name, grades[a], rng)) for a, name in enumerate(ASPECTS)]
    if rng.random() < 0.5:
        sentences.append((None, rng.choice(DISTRACTORS).split() + ["."]))
    rng.shuffle(sentences)
    tokens: list[str] = []
    rationale = []
    for owner, words in sentences:
        if owner == aspect:
            rationale.append((len(tokens), len(tokens) + len(words)))
        tokens += words
    score = min(1.0, max(0.0, sum(grades[aspect]) / 8 + rng.gauss(0.0, 0.02)))
    return Record(id=f"demo-{index}", tokens=tokens, label=round(score, 3), rationale=rationale)


def demo_records(split: str = "train", *, aspect: int = 0, seed: int = 0) -> list[Record]:
    """The demo corpus split ``train`` (2,000), ``valid`` (300) or ``test`` (300)."""
    offset, size = SPLITS[split]
    rng = random.Random(f"{seed}-{offset}")
    return [review(i, aspect, rng) for i in range(size)]
