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
