"""Retrieval over a question's passages (paper §2.2: R(q, D) returns five passages).

One small Protocol with two back-ends: BM25 (bm25s's scores, the embedded default) and dense
retrieval through an OpenAI-compatible embeddings endpoint (the paper used Contriever). Both
return passage ids, best first; ties keep the passages' stored order.
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import math
import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from annotate.revision import llm
from annotate.revision.services.embeddings import StoredPassageVectors

# bm25s sets its own logger to DEBUG (on import), which prints a line for every index it builds.
logging.getLogger("bm25s").setLevel(logging.WARNING)


class Retriever(Protocol):
    def retrieve(self, query: str, passages: Sequence[tuple[int, str]], k: int) -> list[int]:
        """Return the ids of the k passages most relevant to the query, best first."""


# bm25s's (scikit-learn's) token pattern is r"(?u)\b\w\w+\b": every maximal run of two or more
# word characters. Scanning from the left, a match can only start where a run starts and runs
# to its end, so the word boundaries add nothing but a quarter of the matching time.
_WORD = re.compile(r"\w\w+")
_STOPWORDS = frozenset(STOPWORDS_EN)


def _tokens(texts: Sequence[str]) -> list[list[str]]:
    """bm25s.tokenize(texts, stopwords="en", return_ids=False): lower-cased words of two or
    more characters, English stopwords left out. Written out here because bm25s builds the
    stopword set again for every text and numbers the tokens only to turn them back into
    strings: 5 ms for the 888 training instructions of a judge run, before its first call."""
    return [[t for t in _WORD.findall(text.lower()) if t not in _STOPWORDS] for text in texts]


# bm25s's defaults (method and idf "lucene"): the index below computes its scores.
BM25_K1, BM25_B = 1.5, 0.75
_EMPTY_DOCUMENT = "\x00empty"  # bm25s cannot index an empty document: a token no query has


class BM25Index:
    """A BM25 index over documents, built once, ranked for many queries.

    The scores are bm25s's (`bm25s.BM25().index(tokens)`, then `get_scores`), bit for bit; the
    index is built here with numpy over all the documents at once: bm25s counts and scores
    one document at a time in Python, 7 ms for the 888 training instructions of a judge run,
    before its first call (here under 2 ms).
    """

    def __init__(self, documents: Sequence[str]) -> None:
        self.size = len(documents)
        # Tokens numbered as they are found, document after document (`_tokens`, an empty
        # document as one token no query has): no list of token strings in between.
        numbers: dict[str, int] = collections.defaultdict(itertools.count().__next__)
        ids = [
            [numbers[t] for t in _WORD.findall(text.lower()) if t not in _STOPWORDS]
            or [numbers[_EMPTY_DOCUMENT]]
            for text in documents
        ]
        self.vocabulary: dict[str, int] = dict(numbers)
        self.data, self.indices, self.indptr = _bm25_columns(ids, len(self.vocabulary))

    def top(self, query: str, k: int) -> list[int]:
        """Return the indexes of the k documents with the highest BM25 score for the query.

        Documents without any query term come after every matching one, in their given order.
        """
        return self.top_many([query], k)[0]

    def top_many(self, queries: Sequence[str], k: int) -> list[list[int]]:
        """Return `top(query, k)` for each query, tokenizing them all at once (bm25s's
        tokenizer costs about a millisecond a call, whatever the number of texts) and scoring
        them all at once (`scores_many`)."""
        k = min(k, self.size)
        if k == 0:
            return [[] for _ in queries]
        vocabulary = self.vocabulary
        ids = [
            [vocabulary[t] for t in query_tokens if t in vocabulary]
            for query_tokens in (_tokens(queries) if queries else [])
        ]
        order = _top_stable(self.scores_many(ids), k)
        return [[int(i) for i in row] if row_ids else list(range(k)) for row, row_ids in
                zip(order, ids, strict=True)]  # fmt: skip

    def scores_many(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Return each query's BM25 scores (a row per query, token ids given), equal bit for
        bit to bm25s's `get_scores`: each document's score is the float32 sum of the query
        tokens' scores in the query's order, here one token position at a time for all the
        queries together (about 0.1 ms a query for bm25s's loop of numpy calls, a fiftieth
        of that here)."""
        data, indices, indptr = self.data, self.indices, self.indptr
        scores = np.zeros((len(ids), self.size), dtype=data.dtype)
        used = sorted({token for row in ids for token in row})
        if not used:
            return scores
        # The columns of the tokens the queries use, as dense rows (a document at most once
        # per token: adding 0.0 for the others leaves their sums as bm25s leaves them).
        dense = np.zeros((len(used), self.size), dtype=data.dtype)
        for row, token in enumerate(used):
            start, end = indptr[token], indptr[token + 1]
            dense[row, indices[start:end]] = data[start:end]
        position = {token: row for row, token in enumerate(used)}
        for j in range(max(len(row) for row in ids)):
            rows = [q for q, row in enumerate(ids) if len(row) > j]
            scores[rows] += dense[[position[ids[q][j]] for q in rows]]
        return scores


def _bm25_columns(ids: Sequence[Sequence[int]], vocabulary_size: int):
    """Each token's BM25 score in each document holding it, as bm25s's compressed columns
    (data, document indices, column starts), from the documents' token ids.

    bm25s's arithmetic, in its types: idf = log(1 + (N - df + 0.5) / (df + 0.5)) in double,
    kept as float32; tf / (k1 * ((1 - b) + b * length / mean length) + tf) in double (the mean
    length is a numpy float64, which makes the float32 counts double); idf times that in
    double, kept as float32. The same operations element by element give the same bits.
    """
    lengths = np.array([len(doc) for doc in ids])
    if not len(lengths):
        return np.zeros(0, np.float32), np.zeros(0, np.int32), np.zeros(1, np.int64)
    mean_length = lengths.mean()  # as bm25s computes it
    documents = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
    pairs, counts = np.unique(
        documents * vocabulary_size + np.fromiter(itertools.chain.from_iterable(ids), np.int64),
        return_counts=True,
    )
    document, token = np.divmod(pairs, vocabulary_size)
    frequencies = np.bincount(token, minlength=vocabulary_size)
    size = len(ids)
    idf_of = {  # a few distinct document frequencies: math.log as bm25s, not numpy's log
        int(df): math.log(1 + (size - int(df) + 0.5) / (int(df) + 0.5))
        for df in np.unique(frequencies)
    }
    idf = np.array([idf_of[int(df)] for df in frequencies], dtype=np.float32)
    tf = counts.astype(np.float64)
    norm = BM25_K1 * ((1 - BM25_B) + BM25_B * lengths / mean_length)
    scores = (idf[token].astype(np.float64) * (tf / (norm[document] + tf))).astype(np.float32)
    by_token = np.argsort(token, kind="stable")  # each column's documents in index order
    indptr = np.concatenate(([0], np.cumsum(frequencies)))
    return scores[by_token], document[by_token].astype(np.int32), indptr


def _top_stable(scores: np.ndarray, k: int) -> np.ndarray:
    """The indexes of each row's k highest scores, best first, equal scores in index order:
    `np.argsort(-scores, axis=1, kind="stable")[:, :k]`, without sorting whole rows.

    Non-negative float32 scores (BM25's) order as their bit patterns do, so score and index
    make one integer key per document, distinct within a row: a partition then a sort of k
    keys gives the stable order. Anything else is sorted whole.
    """
    if scores.dtype != np.float32 or not scores.size or not (scores >= 0).all():
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    size = scores.shape[1]
    bits = (scores + np.float32(0)).view(np.int32)  # -0.0 becomes 0.0, as equal in a sort
    keys = (np.int64(np.iinfo(np.int32).max) - bits) * size + np.arange(size)
    if k < size:
        keys = np.partition(keys, k - 1, axis=1)[:, :k]
    return np.sort(keys, axis=1) % size


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
