"""Beer-domain word vectors for the beer benchmark: ``rationale vectors`` on the review text
of every ``reviews.aspectN.heldout.txt.gz`` (about 39,000 distinct reviews, 6M tokens; the
scores are not used, and the test reviews of ``annotations.json`` are not among them).

The papers used 200-d vectors trained on the beer reviews themselves (Lei et al., 2016;
Bastings et al., 2019, appendix B, Table 4), which are not available here; these stand in
for them. Needs the ``vectors`` extra (gensim).

    python benchmarks/beer_vectors.py --data-dir ../shared/data --out /tmp/beer-w2v-200d.txt.gz
    python benchmarks/beer.py --embeddings /tmp/beer-w2v-200d.txt.gz ...
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import rationale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data", help="folder holding beer/")
    parser.add_argument("--out", required=True, help="vectors file to write (.gz for gzip)")
    parser.add_argument("--dim", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    files = sorted((Path(args.data_dir).resolve() / "beer").glob("reviews.aspect*.heldout.txt.gz"))
    if not files:
        raise SystemExit(f"{args.data_dir}/beer: no reviews.aspect*.heldout.txt.gz files")
    rationale("vectors", *map(str, files), "--out", str(Path(args.out).resolve()), "--dim", str(args.dim),
              "--epochs", str(args.epochs), "--force")


if __name__ == "__main__":
    main()
