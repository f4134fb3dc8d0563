"""Vector recall by brute force: cosine similarity over the few hundred vectors of the people
present. numpy (about 20 MB) is imported on first use, so a bot without an embedding model
never carries it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def pack(vector: Sequence[float]) -> bytes:
    """float32, little-endian: the stored form."""
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def top_by_cosine(
    query: Sequence[float], rows: Sequence[tuple[T, bytes]], k: int
) -> list[tuple[T, float]]:
    """The k rows nearest to `query`, nearest first, with their cosine similarity. Rows whose
    stored size differs from the query's are skipped (another space)."""
    import numpy as np

    q = np.asarray(query, dtype=np.float32)
    usable = [(item, blob) for item, blob in rows if len(blob) == q.size * 4]
    if not usable or k <= 0:
        return []
    matrix: Any = np.frombuffer(b"".join(blob for _, blob in usable), dtype="<f4")
    matrix = matrix.reshape(len(usable), q.size)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
    scores = (matrix @ q) / np.where(norms == 0, 1.0, norms)
    best = np.argsort(-scores)[:k]
    return [(usable[i][0], float(scores[i])) for i in best]
