"""Beer-domain word vectors for the beer benchmark: word2vec trained on the review text of
every ``reviews.aspectN.heldout.txt.gz`` (about 39,000 reviews, 6M tokens; the scores are
not used, and the test reviews of ``annotations.json`` are left out).

The papers used 200-d vectors trained on the beer reviews themselves (Lei et al., 2016;
Bastings et al., 2019, appendix B, Table 4), which are not available here; these stand in
for them. Needs gensim, which the toolkit itself does not (``pip install gensim``).

    python benchmarks/beer_vectors.py --data-dir ../shared/data --out /tmp/beer-w2v-200d.txt.gz
    python benchmarks/beer.py --embeddings /tmp/beer-w2v-200d.txt.gz ...

Skip-gram with negative sampling, one worker thread and a fixed seed, so the vectors are the
same on every run. Written in word2vec text format (header ``N D``), which
``rationale train --embeddings`` reads.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from rationale_cli.readers import read_records  # noqa: E402


def reviews(beer: Path) -> list[list[str]]:
    """The token lists of every heldout review (each distinct review once)."""
    seen, out = set(), []
    for path in sorted(beer.glob("reviews.aspect*.heldout.txt.gz")):
        for record in read_records(path, "beer"):
            text = " ".join(record.tokens)
            if text not in seen:
                seen.add(text)
                out.append(record.tokens)
    if not out:
        raise SystemExit(f"{beer}: no reviews.aspect*.heldout.txt.gz files")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data", help="folder holding beer/")
    parser.add_argument("--out", required=True, help="vectors file to write (.gz for gzip)")
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        from gensim.models import Word2Vec
    except ImportError:
        raise SystemExit("beer_vectors.py needs gensim: pip install gensim") from None
    sentences = reviews(Path(args.data_dir) / "beer")
    print(f"{len(sentences):,} reviews, {sum(map(len, sentences)):,} tokens")
    model = Word2Vec(sentences, vector_size=args.dim, window=args.window, min_count=args.min_count, sg=1,
                     negative=5, epochs=args.epochs, workers=1, seed=args.seed)
    vectors = model.wv
    opener = gzip.open if args.out.endswith(".gz") else open
    with opener(args.out, "wt", encoding="utf-8") as handle:
        handle.write(f"{len(vectors)} {args.dim}\n")
        for word in vectors.index_to_key:
            handle.write(word + " " + " ".join(f"{v:.5g}" for v in vectors[word]) + "\n")
    print(f"{len(vectors):,} words x {args.dim} -> {args.out}")


if __name__ == "__main__":
    main()
