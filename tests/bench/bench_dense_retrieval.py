"""Benchmark: dense retrieval with stored passage embeddings vs embedding every passage again.

A question with PASSAGES passages (~120 words each) is retrieved against the stub
OpenAI-compatible server (its own process, no delay) through the engine, alternating an
uncached retriever (every passage embedded again, as before the cache) and the stored one
(only the query embedded). Per retrieval: texts and request bytes sent, database queries, CPU
seconds of this process and of the stub (load-independent, unlike wall time, which is printed
too). Then the cost of reading stored vectors of a real embedding size (1,536 floats) for the
question's passages, on the same database.

Runs on a fresh SQLite database in a temporary directory, or on DATABASE_URL if set.

    .venv/bin/python tests/bench/bench_dense_retrieval.py [--passages 300] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import numpy as np  # noqa: E402

from tests.bench.bench_judge import process_cpu_seconds, setup_django  # noqa: E402
from tests.bench.harness import start_openai_stub  # noqa: E402

WORDS = [
    "a",
    "b",
    "c",
    "retrieval",
    "passage",
    "model",
    "answer",
    "citation",
    "evidence",
    "context",
    "length",
]


def make_study(passages: int, rng: random.Random):
    from annotate.revision.models import Passage, Study
    from annotate.revision.services.imports import study_upload

    paragraphs = [" ".join(rng.choice(WORDS) for _ in range(120)) for _ in range(passages)]
    documents = [
        {"title": f"Paper {n}", "text": "\n\n".join(paragraphs[n : n + 10])}
        for n in range(0, passages, 10)
    ]
    path = Path(tempfile.mkdtemp()) / "study.jsonl"
    path.write_text(json.dumps({"question": "a b c?", "documents": documents}) + "\n")
    study_upload(path=str(path), study_name="dense bench", systems=["alpha"])
    study = Study.objects.get(name="dense bench")
    rows = list(
        Passage.objects.filter(question__study=study).order_by("id").values_list("id", "text")
    )
    assert len(rows) == passages, len(rows)
    return rows


def measure(retriever, query: str, rows, stub_pid: int) -> dict[str, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotate.engine.models import EngineCall

    last = EngineCall.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    wall, cpu, stub_cpu = time.perf_counter(), time.process_time(), process_cpu_seconds(stub_pid)
    with CaptureQueriesContext(connection) as queries:
        retriever.retrieve(query, rows, 5)
    measured = {
        "cpu_ms": (time.process_time() - cpu) * 1000,
        "stub_cpu_ms": (process_cpu_seconds(stub_pid) - stub_cpu) * 1000,
        "wall_ms": (time.perf_counter() - wall) * 1000,
    }
    requests = [c.request for c in EngineCall.objects.filter(pk__gt=last)]
    measured["texts"] = sum(len(r["input"]) for r in requests)
    measured["request_kb"] = sum(len(json.dumps(r)) for r in requests) / 1024
    # The engine's own writes (the stored call) are counted with the retrieval's queries.
    measured["queries"] = len(queries)
    return measured


def summary(runs: list[dict[str, float]]) -> str:
    keys = ("texts", "request_kb", "queries", "cpu_ms", "stub_cpu_ms", "wall_ms")
    return ", ".join(f"{k} {statistics.median(r[k] for r in runs):.1f}" for k in keys)


def stored_read_cost(rows, dims: int, repeats: int = 20) -> float:
    """Return the median CPU ms of reading `dims`-float vectors of all passages."""
    from annotate.revision.services.embeddings import (
        passage_embeddings_get,
        passage_embeddings_store,
    )

    rng = random.Random(1)
    key = {"base_url": "http://bench.invalid/v1", "model": f"bench-{dims}"}
    vectors = [[rng.random() for _ in range(dims)] for _ in rows]
    passage_embeddings_store(**key, passages=rows, vectors=vectors)
    costs = []
    for _ in range(repeats):
        cpu = time.process_time()
        got = passage_embeddings_get(**key, passages=rows)
        costs.append((time.process_time() - cpu) * 1000)
        assert len(got) == len(rows)
    return statistics.median(costs)


def reply_parse_cost(count: int, dims: int, repeats: int = 5) -> tuple[float, float]:
    """Return (MB, median CPU ms) of reading an /embeddings reply of `count` vectors of `dims`
    float32 values as the engine does (JSON, then floats): what an uncached retrieval pays for
    every passage on a real model, which the stub's 3-float vectors hide."""
    rng = random.Random(2)
    data = [
        {"index": i, "embedding": [float(np.float32(rng.uniform(-0.1, 0.1))) for _ in range(dims)]}
        for i in range(count)
    ]
    raw = json.dumps({"data": data})
    costs = []
    for _ in range(repeats):
        cpu = time.process_time()
        [[float(x) for x in item["embedding"]] for item in json.loads(raw)["data"]]
        costs.append((time.process_time() - cpu) * 1000)
    return len(raw) / 1e6, statistics.median(costs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp)
        from django.db import connection

        from annotate.engine.services import endpoint_create
        from annotate.revision.retrieval import DenseRetriever, retriever_for

        rng = random.Random(0)
        rows = make_study(args.passages, rng)
        stub, base_url = start_openai_stub(0.0)
        try:
            endpoint_create(
                name="bench-emb",
                base_url=base_url,
                model="stub",
                requests_per_minute=1_000_000,
                tokens_per_minute=1_000_000_000,
            )
            uncached = DenseRetriever("bench-emb")

            def stored():  # a new one per retrieval, as a session's generation makes it
                return retriever_for(retrieval="dense", embedding_endpoint="bench-emb")

            first = measure(stored(), "a b", rows, stub.pid)
            old, new = [], []
            for _ in range(args.rounds):
                query = " ".join(rng.choice(WORDS) for _ in range(6))
                old.append(measure(uncached, query, rows, stub.pid))
                new.append(measure(stored(), query, rows, stub.pid))
        finally:
            stub.terminate()
            stub.wait()
        print(f"database {connection.vendor}, {args.passages} passages, load {os.getloadavg()}")
        print(f"first stored retrieval (fills): {summary([first])}")
        print(f"uncached, median of {args.rounds}: {summary(old)}")
        print(f"stored,   median of {args.rounds}: {summary(new)}")
        for dims in (3, 1536):
            print(
                f"reading {args.passages} stored vectors of {dims} floats: "
                f"{stored_read_cost(rows, dims):.1f} ms CPU (median of 20)"
            )
        size, cost = reply_parse_cost(args.passages + 1, 1536)
        print(
            f"reading an uncached reply of {args.passages + 1} vectors of 1536 floats: "
            f"{size:.1f} MB, {cost:.1f} ms CPU (median of 5)"
        )


if __name__ == "__main__":
    main()
