"""Stored passage embeddings of dense retrieval: a question's passages are embedded once per
embedding model (an endpoint's model at its address), so each later retrieval embeds only its
query. A passage whose text changed since its vector was stored is embedded again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from django.db import transaction

from annotate.revision import llm
from annotate.revision.models import PassageEmbedding

# The floats exactly as the endpoint sent them (JSON numbers read as Python floats), so a stored
# vector ranks the passages as a freshly fetched one does.
VECTOR_DTYPE = np.dtype("<f8")


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def passage_embeddings_get(
    *, base_url: str, model: str, passages: Sequence[tuple[int, str]]
) -> dict[int, np.ndarray]:
    """Return the stored vectors, by passage id, of those passages whose text is the one that
    was embedded; a passage without a vector, or with a stale one, is left out."""
    digests = {passage_id: text_sha256(text) for passage_id, text in passages}
    rows = PassageEmbedding.objects.filter(
        base_url=base_url, model=model, passage_id__in=list(digests)
    ).values_list("passage_id", "text_sha256", "vector")
    return {
        passage_id: np.frombuffer(vector, dtype=VECTOR_DTYPE)
        for passage_id, digest, vector in rows
        if digests[passage_id] == digest
    }


@transaction.atomic
def passage_embeddings_store(
    *,
    base_url: str,
    model: str,
    passages: Sequence[tuple[int, str]],
    vectors: Sequence[Sequence[float]],
) -> None:
    """Store each passage's vector (of its text as given), replacing a stale one.

    Two sessions may embed the same new passages at once: the unique constraint keeps one row
    per passage and model, and the second insert is ignored (both hold the same vector).
    """
    rows = [
        PassageEmbedding(
            passage_id=passage_id,
            base_url=base_url,
            model=model,
            text_sha256=text_sha256(text),
            vector=np.asarray(vector, dtype=VECTOR_DTYPE).tobytes(),
        )
        for (passage_id, text), vector in zip(passages, vectors, strict=True)
    ]
    digests = {row.passage_id: row.text_sha256 for row in rows}
    existing = PassageEmbedding.objects.filter(
        base_url=base_url, model=model, passage_id__in=list(digests)
    ).values_list("pk", "passage_id", "text_sha256")
    stale = [pk for pk, passage_id, digest in existing if digests[passage_id] != digest]
    if stale:
        PassageEmbedding.objects.filter(pk__in=stale).delete()
    PassageEmbedding.objects.bulk_create(rows, ignore_conflicts=True)


class StoredPassageVectors:
    """The passage vectors of one embeddings endpoint's model, kept in the database (the
    `PassageVectors` of dense retrieval)."""

    def __init__(self, endpoint_name: str) -> None:
        self.endpoint_name = endpoint_name
        self._model: tuple[str, str] | None = None

    def _key(self) -> tuple[str, str]:
        # Looked up at first use, inside the caller's error handling, as the embedding call is.
        if self._model is None:
            endpoint = llm.endpoint_named(self.endpoint_name)
            self._model = (endpoint.base_url, endpoint.model)
        return self._model

    def get(self, passages: Sequence[tuple[int, str]]) -> dict[int, np.ndarray]:
        base_url, model = self._key()
        return passage_embeddings_get(base_url=base_url, model=model, passages=passages)

    def put(self, passages: Sequence[tuple[int, str]], vectors: Sequence[Sequence[float]]) -> None:
        base_url, model = self._key()
        passage_embeddings_store(base_url=base_url, model=model, passages=passages, vectors=vectors)
