"""A trained run: its configuration, task, run directory on disk, and inference (a model
decoding documents)."""
