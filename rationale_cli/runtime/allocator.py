"""Keeping freed memory for the next batch (glibc's allocator, ``mallopt``).

Running a model frees and allocates tensors of a few to some tens of MB every batch.
glibc's defaults give such blocks back to the kernel when they are freed (``mmap`` above
a threshold that adapts to the sizes seen, the heap's top trimmed beyond twice that), so
the next batch faults the same pages in again; on the 2-core machine of
``benchmarks/RESULTS.md`` that was a third of the time of annotating with a CNN model, and
of a training step of the RCNN HardKuma model (``train`` and ``predict`` both set it).
:func:`keep_freed_memory` fixes both thresholds: blocks below 32 MB (glibc's largest
adaptive ``mmap`` threshold) come from the heap, and the heap's top is never given back (a
process keeps what it needed at its peak). Over 60 beer batches of 64, the RCNN HardKuma
training steps faulted 2.7 million pages in with the top trimmed beyond 256 MB (freeing a
step's states and gradients left more than that at the top), 1.45 million with it never
trimmed. Taking every block below 1 GB from the heap as well cut that to 0.4 million and the
steps' time by 10-15% against the first setting (4% against the second), but raised the peak
of other beer protocols by 0.1-0.35 GB (the heap fragments), so blocks from 32 MB up stay
mapped apart. Prediction batches are capped in padded tokens
(:func:`rationale_cli.data.batching.capped_batches`), so what predict keeps stays bounded
whatever the corpus size. Settings given in the environment
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``) are left as they are; elsewhere
than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = (1 << 31) - 1  # the largest it takes: the heap's top is never given back


def keep_freed_memory() -> bool:
    """Set glibc's thresholds as above (unless the environment sets them); whether it did."""
    if any(name in os.environ for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
