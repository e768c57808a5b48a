import pytest

from annotate.revision import llm
from annotate.revision.retrieval import BM25Retriever, DenseRetriever, bm25_rank

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


def test_retrievers_return_passage_ids():
    passages = list(zip([10, 11, 12, 13], DOCS, strict=True))
    assert BM25Retriever().retrieve("quadratic attention cost", passages, 1) == [12]
    dense = DenseRetriever("").retrieve("quantization of weights", passages, 2)
    assert dense[0] == 10 and len(dense) == 2


@pytest.mark.django_db
def test_dense_retrieval_asks_the_engine_and_its_call_is_stored():
    from annotate.engine.models import EngineCall
    from annotate.engine.services import endpoint_create
    from tests.evaluation.openai_stub import StubOpenAI

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
