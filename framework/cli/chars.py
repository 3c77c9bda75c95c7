"""Character data for language models: a corpus that ships with Python, ASCII ids, windows.

The default corpus is the text of ``pydoc_data.topics`` (the Python reference
manual's help topics, part of the standard library: ~465,000 characters).
Characters are ASCII codes (0..127; anything else becomes '?'), so a model's
vocabulary does not depend on the corpus.
"""

from __future__ import annotations

import numpy as np

VOCAB = 128


def load_corpus(path: str | None = None) -> str:
    if path:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    import pydoc_data.topics as topics

    return "\n".join(topics.topics[k] for k in sorted(topics.topics))


def encode(text: str) -> np.ndarray:
    ids = np.frombuffer(text.encode("ascii", errors="replace"), dtype=np.uint8).astype(np.int32)
    ids[ids >= VOCAB] = ord("?")
    return ids


def decode(ids: np.ndarray) -> str:
    return bytes(int(i) for i in ids).decode("ascii", errors="replace")


def unigram_entropy(ids: np.ndarray) -> float:
    """Entropy (nats) of the character frequencies: the loss of a model that ignores context."""
    p = np.bincount(ids, minlength=VOCAB).astype(np.float64)
    p = p[p > 0] / p.sum()
    return float(-(p * np.log(p)).sum())


def char_windows(ids: np.ndarray, seq_len: int, test_fraction: float, seed: int):
    """Non-overlapping windows: inputs ids[i:i+T], targets ids[i+1:i+T+1]; the test split is the
    corpus tail (contiguous, so it shares no text with the training windows)."""
    n = (len(ids) - 1) // seq_len
    x = ids[: n * seq_len].reshape(n, seq_len)
    y = ids[1 : n * seq_len + 1].reshape(n, seq_len)
    n_test = max(1, int(round(n * test_fraction)))
    x_tr, y_tr, x_te, y_te = x[:-n_test], y[:-n_test], x[-n_test:], y[-n_test:]
    order = np.random.default_rng(seed).permutation(len(x_tr))
    return x_tr[order], y_tr[order], x_te, y_te
