"""Extractors that select exactly k tokens (a k-subset) of each document: SIMPLE's exact
sampling with the gradient through the exact marginals (:mod:`.simple`, Ahmed et al., 2023)
and the stochastic softmax tricks' top-k and correlated top-k (:mod:`.topk`, Paulus et al., 2020).
"""
