"""Annotating corpora: the local engine (windows, shards, workers, resume, merge) and the
Dask engine."""
