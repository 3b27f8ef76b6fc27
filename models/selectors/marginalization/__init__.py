"""Extractors that marginalize exactly over a sparse set of whole masks, with no sampling
(Correia et al., 2020): SparseMAP (:mod:`.sparsemap`) and top-k sparsemax
(:mod:`.topk_sparsemax`) over the scored masks of :mod:`.mask_set`.
"""
