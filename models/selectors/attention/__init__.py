"""Extractors that read their rationale off an attention layer over the tokens: softmax
attention and its best tokens, the baseline of Lei et al. (2016) (:mod:`.attention`), and the
sparse and structured attention whose support is the rationale (:mod:`.sparse_attention`,
Niculae & Blondel, 2017).
"""
