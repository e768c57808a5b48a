import json
import random
import threading

import bm25s
import numpy as np
import pytest
from django.utils import timezone

from annotate.engine.models import EngineCall
from annotate.revision import llm
from annotate.revision.models import Passage, PassageEmbedding, Study
from annotate.revision.retrieval import (
    BM25Index,
    BM25Retriever,
    DenseRetriever,
    _tokens,
    _top_stable,
    bm25_rank,
    retriever_for,
)
from annotate.revision.services.embeddings import (
    passage_embeddings_get,
    passage_embeddings_store,
    text_sha256,
)
from annotate.revision.services.imports import study_upload
from annotate.revision.services.sessions import session_assign, turn_start
from tests.annotate.engine.conftest import make_endpoint
from tests.annotate.revision.conftest import instruct
from tests.evaluation.openai_stub import StubOpenAI
from tests.factories import UserFactory
from tests.threads import in_thread

DOCS = [
    "Quantization shrinks the weights of language models.",
    "Citations in answers point to retrieved passages.",
    "Attention cost grows with the square of the length.",
    "Readers trust answers with citations more.",
]


def test_bm25_ranks_matching_documents_first_and_keeps_order_on_ties():
    assert sorted(bm25_rank("citations", DOCS, 2)) == [1, 3]
    assert bm25_rank("cat", ["dog here", "cat here", "cat here"], 3) == [1, 2, 0]
    assert bm25_rank("attention length", DOCS, 1) == [2]
    assert bm25_rank("zebra", DOCS, 3) == [0, 1, 2]  # no query term: stored order
    assert bm25_rank("anything", [], 5) == []
    assert len(bm25_rank("citations", DOCS, 10)) == 4


def bm25s_index(docs):
    """bm25s's own index of the documents, as BM25Index tokenizes them."""
    reference = bm25s.BM25()
    reference.index([tokens or ["\x00empty"] for tokens in _tokens(docs)], show_progress=False)
    return reference


def random_corpora(rng, words):
    for trial in range(12):
        size = rng.randint(1, 300)
        pool = words if trial % 3 else words[:4]  # few words: many equal scores
        yield [" ".join(rng.choices(pool, k=rng.randint(0, 25))) for _ in range(size)]


def test_bm25_ranks_many_queries_as_bm25s_ranks_each_bit_for_bit():
    rng = random.Random(0)
    words = [f"w{n}" for n in range(60)]
    for docs in random_corpora(rng, words):
        size = len(docs)
        index, reference = BM25Index(docs), bm25s_index(docs)
        queries = [
            " ".join(rng.choices(words + ["zebra"], k=rng.randint(0, 30))) for _ in range(50)
        ]
        k = rng.choice([1, 5, 10, size, size + 3])
        for query, got in zip(queries, index.top_many(queries, k), strict=True):
            tokens = [t for t in _tokens([query])[0] if t in index.vocabulary]
            if not tokens:
                assert got == list(range(min(k, size)))
                continue
            scores = reference.get_scores(tokens)
            ids = [[index.vocabulary[t] for t in tokens]]
            assert index.scores_many(ids)[0].tobytes() == scores.tobytes()
            assert got == [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def test_the_bm25_index_holds_bm25s_scores_bit_for_bit():
    rng = random.Random(1)
    words = [f"w{n}" for n in range(300)]
    for docs in [*random_corpora(rng, words), ["", ""], ["the of", "w1 w1 w1"]]:
        index, reference = BM25Index(docs), bm25s_index(docs)
        assert index.vocabulary.keys() == set(reference.vocab_dict) - {""}
        for token, column in index.vocabulary.items():
            theirs = reference.vocab_dict[token]
            start, end = reference.scores["indptr"][theirs : theirs + 2]
            mine = slice(index.indptr[column], index.indptr[column + 1])
            assert index.indices[mine].tolist() == reference.scores["indices"][start:end].tolist()
            assert index.data[mine].tobytes() == reference.scores["data"][start:end].tobytes()


def test_the_tokens_are_bm25s_tokens():
    texts = [
        "",
        "The cat's 2 CATS, a_b and x y; THE end.",
        "Naïve café İstanbul ΣΊΣΥΦΟΣ don't won’t 3.14 x2 __init__ 😀 a",
        "\n".join(DOCS),
    ]
    rng = random.Random(2)  # runs of word and other characters of every length, mixed
    texts += ["".join(rng.choices("aZ_9é. ,'’-\n\t", k=rng.randint(0, 80))) for _ in range(300)]
    assert _tokens(texts) == bm25s.tokenize(
        texts, stopwords="en", return_ids=False, show_progress=False
    )


def test_top_k_keeps_index_order_on_ties_and_sorts_other_scores_whole():
    scores = np.array([[0.0, 2.0, 1.0, 2.0, -0.0, 1.0]], dtype=np.float32)
    assert _top_stable(scores, 4).tolist() == [[1, 3, 2, 5]]
    assert _top_stable(scores, 6).tolist() == [[1, 3, 2, 5, 0, 4]]
    negative = np.array([[-1.0, 0.5, -1.0]], dtype=np.float32)
    assert _top_stable(negative, 2).tolist() == [[1, 0]]


def test_retrievers_return_passage_ids():
    passages = list(zip([10, 11, 12, 13], DOCS, strict=True))
    assert BM25Retriever().retrieve("quadratic attention cost", passages, 1) == [12]
    dense = DenseRetriever("").retrieve("quantization of weights", passages, 2)
    assert dense[0] == 10 and len(dense) == 2


@pytest.mark.django_db
def test_dense_retrieval_asks_the_engine_and_its_call_is_stored():
    from annotate.engine.services import endpoint_create

    passages = [(10, "c c"), (11, "a b"), (12, "a a b"), (13, "b")]
    with StubOpenAI() as stub:
        endpoint_create(name="emb", model="embed-1", base_url=stub.base_url, max_retries=0)
        # The stub's vectors count "a", "b", "c": the query "a a" is closest to "a a b".
        assert DenseRetriever("emb").retrieve("a a", passages, 2) == [12, 11]
        stub.fail_next(400, message="too many inputs")
        with pytest.raises(llm.ModelCallError, match="too many inputs"):
            DenseRetriever("emb").retrieve("a", passages, 2)
    assert stub.requests[0] == {"model": "embed-1", "input": ["a a", "c c", "a b", "a a b", "b"]}
    calls = list(EngineCall.objects.order_by("pk").values_list("purpose", "status"))
    assert calls == [("revision-retrieval", "ok"), ("revision-retrieval", "error")]


# Paragraphs become passages; the stub's vectors count the words "a", "b", "c".
DENSE_QUESTION = {
    "question": "a b",
    "documents": [
        {"title": "One", "text": "a a b\n\nc c\n\nb\n\na c"},
        {"title": "Two", "text": "b b c\n\na\n\nc a a\n\nnothing here"},
    ],
}


def make_dense_study(tmp_path, settings, base_url: str):
    """A one-question study retrieving through the embeddings endpoint "emb" on the stub; the
    systems are the offline fake model, so every request the stub sees is an embedding."""
    settings.REVISION_GENERATION = "inline"
    path = tmp_path / "dense.jsonl"
    path.write_text(json.dumps(DENSE_QUESTION) + "\n")
    study_upload(path=str(path), study_name="dense", systems=["alpha"])
    make_endpoint(base_url, name="emb", model="embed-1", max_retries=0)
    Study.objects.filter(name="dense").update(retrieval="dense", embedding_endpoint="emb")
    return Study.objects.get(name="dense")


def passage_rows(study):
    return list(
        Passage.objects.filter(question__study=study).order_by("id").values_list("id", "text")
    )


def searched_rows(study):
    """The passages as a session searches them: each with its paper's title first."""
    rows = Passage.objects.filter(question__study=study).order_by("id")
    return [
        (pk, f"{title}\n{text}")
        for pk, title, text in rows.values_list("id", "document__title", "text")
    ]


def stored_retriever():
    return retriever_for(retrieval="dense", embedding_endpoint="emb")


@pytest.mark.django_db
def test_a_sessions_later_retrievals_embed_only_their_query(
    tmp_path, settings, django_capture_on_commit_callbacks
):
    with StubOpenAI() as stub:
        study = make_dense_study(tmp_path, settings, stub.base_url)
        texts = [text for _, text in searched_rows(study)]
        user = UserFactory(username="dense-annotator")
        with django_capture_on_commit_callbacks(execute=True):
            session = session_assign(study=study, user=user, now=timezone.now())
        with django_capture_on_commit_callbacks(execute=True):
            turn = turn_start(
                session_id=session.pk,
                user=user,
                instruction="c c c",
                instruction_type="information-seeking",
                now=timezone.now(),
            )
        uncached = DenseRetriever("emb")
        rows = searched_rows(study)
        expected_initial = uncached.retrieve("a b", rows, 5)
        expected_turn = uncached.retrieve("c c c", rows, 5)
    assert stub.requests[:2] == [
        {"model": "embed-1", "input": ["a b", *texts]},
        {"model": "embed-1", "input": ["c c c"]},
    ]
    session.refresh_from_db()
    turn.refresh_from_db()
    assert (session.initial_passages, turn.passages) == (expected_initial, expected_turn)
    assert PassageEmbedding.objects.count() == len(texts) == 8
    # Every embedding request made is a stored engine call, the cached ones too.
    assert EngineCall.objects.filter(purpose="revision-retrieval", status="ok").count() == 4


@pytest.mark.django_db
def test_an_edited_passage_is_embedded_again_and_ranks_by_its_new_text(tmp_path, settings):
    with StubOpenAI() as stub:
        study = make_dense_study(tmp_path, settings, stub.base_url)
        assert stored_retriever().retrieve("c", passage_rows(study), 1) == [
            pid for pid, text in passage_rows(study) if text == "c c"
        ]
        edited = Passage.objects.get(question__study=study, text="c c")
        Passage.objects.filter(pk=edited.pk).update(text="a a a")
        ranked = stored_retriever().retrieve("a", passage_rows(study), 1)
    assert stub.requests[1]["input"] == ["a", "a a a"]
    # Passage "a" and the edited "a a a" point the same way; the edited one comes first in id
    # order only if its vector is the new one.
    assert ranked == [edited.pk]
    row = PassageEmbedding.objects.get(passage=edited)
    assert row.text_sha256 == text_sha256("a a a")
    assert PassageEmbedding.objects.count() == 8


@pytest.mark.django_db
def test_stored_vectors_rank_exactly_as_freshly_fetched_ones(tmp_path, settings):
    queries = ["a b", "c", "b b a", "zebra", "a c c", "b"]
    with StubOpenAI() as stub:
        study = make_dense_study(tmp_path, settings, stub.base_url)
        rows = passage_rows(study)
        for k in (1, 3, 5, 8):
            for query in queries:
                fresh = DenseRetriever("emb").retrieve(query, rows, k)
                assert stored_retriever().retrieve(query, rows, k) == fresh
        # A retrieval over part of the passages uses the stored vectors of that part only.
        assert stored_retriever().retrieve("a", rows[2:5], 3) == DenseRetriever("emb").retrieve(
            "a", rows[2:5], 3
        )
    assert sum(len(body["input"]) > 1 for body in stub.requests) == 1 + 4 * len(queries) + 1


@pytest.mark.django_db
def test_storing_the_same_passages_twice_keeps_one_vector_each(tmp_path, settings):
    """Two sessions that both find a passage without a vector both embed it; one row stays."""
    study = make_dense_study(tmp_path, settings, "http://127.0.0.1:9/v1")
    rows = passage_rows(study)[:2]
    key = {"base_url": "http://127.0.0.1:9/v1", "model": "embed-1"}
    passage_embeddings_store(**key, passages=rows, vectors=[[0.1, 0.2], [0.3, 0.4]])
    passage_embeddings_store(**key, passages=rows, vectors=[[0.1, 0.2], [0.3, 0.4]])
    assert PassageEmbedding.objects.count() == 2
    stored = passage_embeddings_get(**key, passages=rows)
    assert {pid: list(vector) for pid, vector in stored.items()} == {
        rows[0][0]: [0.1, 0.2],
        rows[1][0]: [0.3, 0.4],
    }
    # Another model's vectors are its own.
    assert passage_embeddings_get(base_url=key["base_url"], model="other", passages=rows) == {}


@pytest.mark.django_db(transaction=True)
def test_two_sessions_embedding_the_same_new_passages_at_once_store_one_vector_each(
    tmp_path, settings
):
    # The stub holds each request until both have arrived: both sessions have looked for
    # stored vectors, found none, and embed the passages before either stores them.
    both_asked = threading.Barrier(2, timeout=10)
    found_a, found_c = [], []
    with StubOpenAI(on_request=lambda count: both_asked.wait()) as stub:
        study = make_dense_study(tmp_path, settings, stub.base_url)
        rows = passage_rows(study)
        threads = [
            in_thread(lambda q=query: stored_retriever().retrieve(q, rows, 3), found)
            for query, found in (("a", found_a), ("c", found_c))
        ]
        for thread in threads:
            thread.join()
    results = {"a": found_a[0], "c": found_c[0]}
    assert not any(isinstance(found, Exception) for found in results.values()), results
    assert sorted(len(body["input"]) for body in stub.requests) == [9, 9]
    assert PassageEmbedding.objects.count() == 8
    ids = [pid for pid, _ in rows]
    # "a": passages "a", "a a b", "c a a"; "c": "c c", "a c", then "b b c" before the equal
    # "c a a" (stored order).
    assert results == {"a": [ids[5], ids[0], ids[6]], "c": [ids[1], ids[3], ids[4]]}


@pytest.mark.django_db
def test_an_instruction_naming_a_paper_finds_its_passages_by_the_title(
    tmp_path, settings, django_capture_on_commit_callbacks
):
    """ "Mention when retrieval hurts." ranked the passage of the paper titled "When Retrieval
    Hurts" last: no passage repeats the title's words, and BM25 saw the passages alone."""
    settings.REVISION_GENERATION = "inline"
    question = {
        "question": "How do models use long contexts?",
        "documents": [
            {"title": "Long contexts", "text": "Models use long contexts poorly.\n\nMore text."},
            {"title": "When Retrieval Hurts", "text": "Irrelevant passages mislead models."},
        ],
    }
    path = tmp_path / "study.jsonl"
    path.write_text(json.dumps(question) + "\n")
    study_upload(path=str(path), study_name="titles", systems=["alpha"])
    Study.objects.filter(name="titles").update(passages_per_retrieval=1)
    study = Study.objects.get(name="titles")
    user = UserFactory(username="title-reader")
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=user, now=timezone.now())
    turn = instruct(
        django_capture_on_commit_callbacks,
        session,
        user,
        "Mention when retrieval hurts.",
        "information-seeking",
    )
    turn.refresh_from_db()
    found = Passage.objects.get(pk=turn.passages[0])
    assert found.document.title == "When Retrieval Hurts"
