"""Keeping freed memory for the next batch (glibc's allocator, ``mallopt``).

Running a model frees and allocates tensors of a few to some tens of MB every batch.
glibc's defaults give such blocks back to the kernel when they are freed (``mmap`` above
a threshold that adapts to the sizes seen, the heap's top trimmed beyond twice that), so
the next batch faults the same pages in again; on the 2-core machine of
``benchmarks/RESULTS.md`` that was a third of the time of annotating with a CNN model, and
of a training step of the RCNN HardKuma model (``train`` and ``predict`` both set it).
:func:`keep_freed_memory` fixes both thresholds: blocks below 1 GB come from the heap, and
the heap's top is not given back (a process keeps what it needed at its peak). With 32 MB
and 256 MB, the RCNN HardKuma training steps still faulted 2.7 million pages in over 60
beer batches of 64 (a step's input projections, states and their gradients are 10-120 MB
each, and freeing them left over 1 GB at the heap's top); with these, 0.4 million, and the
steps took 10-15% less time for 0.1 GB more resident memory. Batches are capped in padded tokens (:func:`rationale_cli.data.batching.capped_batches`),
so what is kept stays bounded whatever the corpus size. Settings given in the environment
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``) are left as they are; elsewhere
than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 30
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
