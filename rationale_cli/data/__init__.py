"""Documents in: records, tokenization, readers of every input format, where documents come
from (``sources``), vocabulary, word vectors, batching and the synthetic demo corpus."""
