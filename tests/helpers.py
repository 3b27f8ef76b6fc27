"""Small helpers shared by the tests."""

import gzip


def write(path, text: str):
    """Write ``text`` to ``path`` (gzip-compressed for ``*.gz``) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
