"""The full-text reference: the classifier a user would otherwise have, beside every run.

A linear model on TF-IDF n-gram features of the whole text (logistic regression for classes,
ridge regression for scores; scikit-learn's), its n-gram range and regularisation chosen on
the validation split. Term frequencies are sublinear (1 + log tf), measured better than raw
counts on validation (``benchmarks/reference.py``). It reads every token, so the difference between its score and the
rationale model's is what reading only the rationale costs on the user's data.

Saved in the run directory without pickle (:func:`rationale_cli.runs.run_directory.save_reference`):
``reference.json`` (the vocabulary, the chosen setting, the validation scores of every setting
tried) and ``reference.safetensors`` (the inverse document frequencies, weights and bias).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

import numpy as np

from rationale_cli.data.batching import model_tokens
from rationale_cli.data.records import Record
from rationale_cli.models.architectures import LINEAR
from rationale_cli.runs.flags import flag_of
from rationale_cli.runs.task import Classification, Task
from rationale_cli.runtime.errors import UserError

FORMAT = 1
NGRAMS = (1, 2)  # the longest n-gram: words alone, then words and bigrams
STRENGTHS = {"logistic": (1.0, 10.0, 100.0, 1000.0),  # C, the inverse of the L2 penalty
             "ridge": (0.1, 0.3, 1.0, 3.0)}  # alpha, the L2 penalty
NAMES = {"logistic": "logistic regression", "ridge": "ridge regression"}
PARAMETER = {"logistic": "C", "ridge": "alpha"}
REFERENCE_SUPPORT = "reference"  # train --support reference: the run's own reference selects (not a path)
SALIENCY = "saliency"  # its extractor, never trained


def ngrams(tokens: Sequence[str], longest: int) -> list[str]:
    """The lowercased n-grams of ``tokens`` up to length ``longest`` (words joined by a space)."""
    words = [token.lower() for token in tokens]
    return [" ".join(words[i:i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)]


def setting_name(kind: str, longest: int, strength: float, balanced: bool = False) -> str:
    """A linear n-gram model's setting in words, e.g. 'TF-IDF 1-2-grams, logistic regression, C=10'."""
    words = "words" if longest == 1 else f"1-{longest}-grams"
    return f"TF-IDF {words}, {NAMES[kind]}, {PARAMETER[kind]}={strength:g}{', classes weighted' if balanced else ''}"


def main_metric(task: Task) -> str:
    """The task metric the reference and the model are compared on."""
    return "accuracy" if isinstance(task, Classification) else "mse"


def better(metric: str, a: float, b: float) -> bool:
    """Whether ``a`` is a better value of ``metric`` than ``b``."""
    return a < b if metric == "mse" else a > b


@dataclass
class Reference:
    """A fitted full-text reference (see the module docstring)."""

    kind: str  # logistic or ridge
    longest: int  # the longest n-gram
    strength: float  # C for logistic regression, alpha for ridge
    vocabulary: list[str]
    idf: np.ndarray  # [F]
    weights: np.ndarray  # [K, F]
    bias: np.ndarray  # [K]
    classes: list[str] | None  # the label of each row of a multi-class model; [negative, positive] for two
    valid: dict = field(default_factory=dict)  # {"metric", "value", "documents"} of the chosen setting
    tried: list[dict] = field(default_factory=list)  # every setting and its validation value
    sublinear: bool = True  # term frequencies as 1 + log tf (False: raw counts)
    balanced: bool = False  # each class's documents weighted inversely to its frequency in the fit

    @property
    def setting(self) -> str:
        """What the reference is, for a table or a line."""
        return setting_name(self.kind, self.longest, self.strength, self.balanced)

    def features(self, records: Sequence[Record]):
        """The TF-IDF matrix of the records, [N, F] sparse (l2-normalised rows, as fitted)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(analyzer=lambda r: ngrams(model_tokens(r), self.longest),
                                     vocabulary={term: i for i, term in enumerate(self.vocabulary)},
                                     sublinear_tf=self.sublinear, dtype=np.float32)
        vectorizer.idf_ = self.idf
        return vectorizer.transform(records)

    @cached_property
    def term_index(self) -> dict[str, int]:
        """Each vocabulary term's feature column."""
        return {term: i for i, term in enumerate(self.vocabulary)}

    def word_saliency(self, words: Sequence[str]) -> np.ndarray:
        """Each word's saliency: the largest absolute weight (over the rows) times the inverse
        document frequency of its unigram feature, the part of the decision one occurrence
        gives before the document's normalisation; 0 for a word without a feature. The table of
        ``train --support reference`` (:mod:`rationale_cli.models.selectors.saliency`)."""
        per_feature = np.abs(self.weights).max(0) * self.idf
        return np.array([per_feature[i] if (i := self.term_index.get(w.lower())) is not None else 0.0
                         for w in words], dtype=np.float32)

    def token_contributions(self, record: Record, row: int = 0) -> np.ndarray:
        """Each document token's share of the decision value of weight row ``row`` (its score's
        part from the token): an n-gram's TF-IDF feature (as :meth:`features` computes it) times
        its weight is split evenly over its occurrences and, within one, over its words, so the
        shares sum to the decision value less the bias. The saliency of a full-text model
        (FRESH: Jain et al., 2020, section 3)."""
        words = [word.lower() for word in model_tokens(record)]
        found: dict[int, list[tuple[int, int]]] = {}  # feature -> (start, length) of each occurrence
        for n in range(1, self.longest + 1):
            for start in range(len(words) - n + 1):
                feature = self.term_index.get(" ".join(words[start:start + n]))
                if feature is not None:
                    found.setdefault(feature, []).append((start, n))
        shares = np.zeros(len(words))
        if found:
            features = np.fromiter(found, dtype=np.int64)
            counts = np.array([len(found[f]) for f in features], dtype=np.float64)
            values = (1 + np.log(counts) if self.sublinear else counts) * self.idf[features]
            values *= self.weights[row][features] / np.linalg.norm(values)
            for feature, value, count in zip(features.tolist(), values.tolist(), counts.tolist()):
                for start, n in found[feature]:
                    shares[start:start + n] += value / (count * n)
        return shares[:len(record.tokens)]

    def predict(self, records: Sequence[Record]) -> list:
        """Each record's class name or score in [0, 1]."""
        if not records:
            return []
        scores = np.asarray(self.features(records) @ self.weights.T) + self.bias
        if self.kind == "ridge":
            return np.clip(scores[:, 0], 0.0, 1.0).tolist()
        best = (scores[:, 0] > 0).astype(int) if len(self.weights) == 1 else scores.argmax(1)
        return [self.classes[i] for i in best.tolist()]

    def score(self, records: Sequence[Record], task: Task) -> float:
        """The task metric of its predictions on labelled ``records``."""
        scores = task.scores()
        for prediction, record in zip(self.predict(records), records):
            scores.add(prediction, record.label)
        return scores.result()[main_metric(task)]

    def compared(self, records: Sequence[Record], task: Task, model_value: float | None) -> dict:
        """``full_text_reference`` of evaluate's metrics: the reference scored on labelled
        ``records`` beside the model's ``model_value`` there (:meth:`beside`)."""
        return self.beside(main_metric(task), self.score(records, task), model_value, len(records))

    def beside(self, metric: str, value: float | None, model_value: float | None, documents: int) -> dict:
        """The reference's ``value`` of ``metric`` and the model's, with the model's minus the
        reference's (``difference``)."""
        return {"metric": metric, "value": value, "model": model_value,
                "difference": None if model_value is None or value is None else model_value - value,
                "setting": self.setting, "documents": documents}

    def to_files(self) -> tuple[dict, dict[str, np.ndarray]]:
        """What ``reference.json`` and ``reference.safetensors`` hold (:func:`from_files` reads them)."""
        return ({"format": FORMAT, "kind": self.kind, "longest_ngram": self.longest, "strength": self.strength,
                 "classes": self.classes, "setting": self.setting, "valid": self.valid, "tried": self.tried,
                 "sublinear": self.sublinear, "balanced": self.balanced, "vocabulary": self.vocabulary},
                {"idf": self.idf, "weights": self.weights, "bias": self.bias})


def from_files(data: dict, arrays: dict[str, np.ndarray]) -> Reference:
    """The reference of :meth:`Reference.to_files`'s two parts; ValueError, KeyError or
    TypeError where they are not such a reference."""
    reference = Reference(data["kind"], int(data["longest_ngram"]), float(data["strength"]), data["vocabulary"],
                          arrays["idf"], arrays["weights"], arrays["bias"], data["classes"], data["valid"],
                          data["tried"], bool(data.get("sublinear", True)), bool(data.get("balanced", False)))
    if data.get("format") != FORMAT or reference.kind not in STRENGTHS or \
            reference.weights.shape[1:] != (len(reference.vocabulary),):
        raise ValueError("not a full-text reference this rationale-cli reads")
    return reference


def support_extractor(general: dict, given: set[str] | None, extractor: str) -> str:
    """The extractor of the checked training options ``general`` (``extractor`` where given or
    by default): ``saliency`` with ``--support reference``, which selects by the reference's
    saliency (another extractor given, or ``--no-reference``, is refused); ``saliency`` is never
    trained, so it goes with that support only. Sets the support's decoding where not given:
    a run's in sentences, the reference's in tokens."""
    if general.get("support") and general.get("support_sentences") is None:
        general["support_sentences"] = general["support"] != REFERENCE_SUPPORT
    if general.get("support") != REFERENCE_SUPPORT:
        if extractor == SALIENCY:
            raise UserError(f"--extractor {SALIENCY} is fixed, never trained: it is the selector of "
                            f"--support {REFERENCE_SUPPORT}")
        return extractor
    if extractor != SALIENCY and "extractor" in (given or ()):
        raise UserError(f"--support {REFERENCE_SUPPORT} selects by the full-text reference's saliency; "
                        f"leave out --extractor {extractor}")
    if general.get("reference") is False:
        raise UserError(f"--support {REFERENCE_SUPPORT} selects by the full-text reference; leave out --no-reference")
    general["extractor"] = SALIENCY
    return SALIENCY


def check_linear_predictor(general: dict) -> None:
    """One error line where the checked training options ``general`` ask for the ``linear``
    predictor (:mod:`rationale_cli.models.encoders.tfidf`) with what it cannot do: fitted on a
    fixed support's rationales, it takes no full-text guidance and no balanced epochs (they train a
    predictor by gradients); without a support it is the full-text reference itself, fixed, so it
    needs the reference and takes no guidance either."""
    if general.get("predictor_encoder") != LINEAR:
        return
    if general.get("support"):
        asked = [flag for flag in ("guidance", "balance_classes") if general.get(flag)]
        why = f"the {LINEAR} predictor is fitted in one pass"
    else:
        if not general.get("reference", True):
            raise UserError(f"--predictor-encoder {LINEAR} without --support reads the rationale with the full-text "
                            "reference itself; train without --no-reference (or give --support RUN to fit it on a "
                            "run's rationales)")
        asked = [flag for flag in ("guidance",) if general.get(flag)]
        why = f"without --support the {LINEAR} predictor is the full-text reference, fixed"
    if asked:
        raise UserError(f"{flag_of(asked[0])} trains a predictor by gradients; {why}")


def fit_reference(train: Sequence[Record], valid: Sequence[Record], task: Task, sublinear: bool = True,
                  balanced: bool = False) -> Reference:
    """The reference of every n-gram range and strength, each fitted on ``train``; the one
    best on ``valid`` (the first of equals: the shorter n-grams and the stronger penalty).
    ``sublinear``: term frequencies as 1 + log tf (the default, measured best), else raw counts;
    ``balanced`` (a classification run's ``--balance-classes``): each class weighted inversely
    to its frequency, as the run's balanced epochs weigh them."""
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression, Ridge
    except ImportError:
        raise UserError("the full-text reference needs scikit-learn (pip install scikit-learn); "
                        "or train with --no-reference") from None

    kind = "logistic" if isinstance(task, Classification) else "ridge"
    weighted = "balanced" if balanced and kind == "logistic" else None
    metric = main_metric(task)
    targets = [str(r.label) if kind == "logistic" else float(r.label) for r in train]
    best: Reference | None = None
    tried = []
    for longest in NGRAMS:
        vectorizer = TfidfVectorizer(analyzer=lambda r, n=longest: ngrams(model_tokens(r), n), sublinear_tf=sublinear,
                                     dtype=np.float32)
        features = vectorizer.fit_transform(train)
        vocabulary = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.get)
        for strength in STRENGTHS[kind]:
            model = (LogisticRegression(C=strength, max_iter=2000, class_weight=weighted) if kind == "logistic"
                     else Ridge(alpha=strength)).fit(features, targets)
            weights = np.atleast_2d(model.coef_).astype(np.float32)
            bias = np.atleast_1d(np.asarray(model.intercept_, dtype=np.float32))
            classes = [str(c) for c in model.classes_] if kind == "logistic" else None
            candidate = Reference(kind, longest, strength, vocabulary, vectorizer.idf_.astype(np.float32),
                                  weights, bias, classes, sublinear=sublinear, balanced=weighted is not None)
            value = candidate.score(valid, task)
            tried.append({"longest_ngram": longest, PARAMETER[kind]: strength, metric: value})
            if best is None or (value is not None and better(metric, value, best.valid["value"])):
                candidate.valid = {"metric": metric, "value": value, "documents": len(valid)}
                best = candidate
    best.tried = tried
    return best
