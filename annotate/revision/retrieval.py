"""Retrieval over a question's passages (paper §2.2: R(q, D) returns five passages).

One small Protocol with two back-ends: BM25 (bm25s, the embedded default) and dense retrieval
through an OpenAI-compatible embeddings endpoint (the paper used Contriever). Both return passage
ids, best first; ties keep the passages' stored order.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Protocol

import bm25s
import numpy as np

from annotate.revision import llm
from annotate.revision.services.embeddings import StoredPassageVectors

# bm25s sets its own logger to DEBUG, which prints a line for every index it builds.
logging.getLogger("bm25s").setLevel(logging.WARNING)


class Retriever(Protocol):
    def retrieve(self, query: str, passages: Sequence[tuple[int, str]], k: int) -> list[int]:
        """Return the ids of the k passages most relevant to the query, best first."""


def _tokens(texts: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)


class BM25Index:
    """A BM25 index (bm25s) over documents, built once, ranked for many queries."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.size = len(documents)
        self.retriever = bm25s.BM25()
        if self.size:
            # bm25s cannot index an empty token list; a placeholder token never matches a query.
            corpus = [tokens or ["\x00empty"] for tokens in _tokens(documents)]
            self.retriever.index(corpus, show_progress=False)

    def top(self, query: str, k: int) -> list[int]:
        """Return the indexes of the k documents with the highest BM25 score for the query.

        Documents without any query term come after every matching one, in their given order.
        """
        return self.top_many([query], k)[0]

    def top_many(self, queries: Sequence[str], k: int) -> list[list[int]]:
        """Return `top(query, k)` for each query, tokenizing them all at once (bm25s's
        tokenizer costs about a millisecond a call, whatever the number of texts)."""
        k = min(k, self.size)
        if k == 0:
            return [[] for _ in queries]
        vocabulary = self.retriever.vocab_dict
        ranked = []
        for query_tokens in _tokens(queries) if queries else []:
            tokens = [t for t in query_tokens if t in vocabulary]
            if not tokens:
                ranked.append(list(range(k)))
                continue
            scores = self.retriever.get_scores(tokens)
            # Stable sort on the negated scores: equal scores keep the documents' order.
            ranked.append([int(i) for i in np.argsort(-scores, kind="stable")[:k]])
        return ranked


@functools.lru_cache(maxsize=64)
def _bm25_index(documents: tuple[str, ...]) -> BM25Index:
    # A question's passages are ranked again at every information-seeking turn of every
    # session on it: building the index each time was a quarter of the background work of a
    # turn, in the web process when generation runs in its threads. Keyed on the texts
    # themselves, so an edited passage gets a new index.
    return BM25Index(documents)


def bm25_rank(query: str, documents: Sequence[str], k: int) -> list[int]:
    """Return the indexes of the k documents most BM25-similar to the query (see BM25Index)."""
    return _bm25_index(tuple(documents)).top(query, k)


class BM25Retriever:
    def retrieve(self, query: str, passages: Sequence[tuple[int, str]], k: int) -> list[int]:
        order = bm25_rank(query, [text for _, text in passages], k)
        return [passages[i][0] for i in order]


class PassageVectors(Protocol):
    """Where dense retrieval keeps passage embeddings between retrievals."""

    def get(self, passages: Sequence[tuple[int, str]]) -> dict[int, np.ndarray]:
        """Return the kept vectors, by id, of the passages whose text has not changed."""

    def put(self, passages: Sequence[tuple[int, str]], vectors: Sequence[Sequence[float]]) -> None:
        """Keep these passages' vectors, embedded from the texts given."""


class DenseRetriever:
    """Cosine similarity of embeddings from an OpenAI-compatible endpoint (through the seam).

    With `stored`, passages embedded before are not embedded again: one engine call embeds the
    query with the passages that have no vector yet (or whose text changed), and keeps those.
    """

    def __init__(self, endpoint_name: str, *, stored: PassageVectors | None = None) -> None:
        self.endpoint_name = endpoint_name
        self.stored = stored

    def retrieve(self, query: str, passages: Sequence[tuple[int, str]], k: int) -> list[int]:
        if not passages:
            return []
        known = self.stored.get(passages) if self.stored else {}
        missing = [(pid, text) for pid, text in passages if pid not in known]
        query_vector, *fresh = llm.embed(
            endpoint_name=self.endpoint_name, texts=[query, *(text for _, text in missing)]
        )
        if self.stored and missing:
            self.stored.put(missing, fresh)
        by_id = known | {pid: vector for (pid, _), vector in zip(missing, fresh, strict=True)}
        vectors = np.asarray([query_vector, *(by_id[pid] for pid, _ in passages)], dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1)
        norms[norms == 0] = 1.0
        unit = vectors / norms[:, None]
        scores = unit[1:] @ unit[0]
        order = np.argsort(-scores, kind="stable")[: min(k, len(passages))]
        return [passages[int(i)][0] for i in order]


def retriever_for(*, retrieval: str, embedding_endpoint: str = "") -> Retriever:
    """Return the study's retriever: "bm25" (default) or "dense", whose passage vectors are
    stored in the database when it embeds through an engine endpoint."""
    if retrieval == "dense":
        stored = StoredPassageVectors(embedding_endpoint) if embedding_endpoint else None
        return DenseRetriever(embedding_endpoint, stored=stored)
    return BM25Retriever()
