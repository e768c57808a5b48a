"""Which runs set a judge's labels (evaluation.selectors.judge_label_runs) over ~200,000 answer
rows on PostgreSQL: the aggregate in SQL against the former loop over every row in Python.

One benchmark of 2,400 instructions x 5 systems x 10 questions (120,000 labels of one LLM judge),
judged by two runs: #1 done over every response (120,000 answer rows), #2 cancelled after
replacing 8,000 responses, the last 400 of them answered only in part (78,000 rows). Everything
by bulk_create into a scratch database of its own (recreated), then each selector timed in turn,
best of RUNS, in this one process, after a call of each to warm the connection and the cache;
both must return the same runs.

    .venv/bin/python tests/bench/bench_judge_label_runs.py
    PG_URL=postgres://root@127.0.0.1:5432 ...       # where the scratch database is
    BENCH_JUDGE_LABEL_RUNS_DB=h_provread ...        # its name (bench_judge_label_runs)
    BENCH_RUNS=5 ...                                # timings per selector (3)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import recreate_database, setup_django  # noqa: E402

PG_URL = os.environ.get("PG_URL", "postgres://root@127.0.0.1:5432")
DATABASE = os.environ.get("BENCH_JUDGE_LABEL_RUNS_DB", "bench_judge_label_runs")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
INSTRUCTIONS, SYSTEMS, QUESTIONS = 2400, 5, 10
REPLACED, IN_PART = 8000, 400  # responses run #2 answered, the last of them half-way


def fill():
    from annotate.engine.models import Endpoint
    from annotate.models import (
        Annotator,
        AnnotatorKind,
        Benchmark,
        Instruction,
        Label,
        Question,
        Response,
        System,
    )
    from evaluation.models import (
        ConversationStatus,
        JudgeCall,
        JudgeConfig,
        JudgeConversation,
        JudgeRun,
        RunStatus,
    )

    benchmark = Benchmark.objects.create(name="bench judge label runs")
    instructions = Instruction.objects.bulk_create(
        Instruction(
            benchmark=benchmark,
            external_id=f"i{n}",
            subset="easy",
            category="Writing",
            text=f"Do {n}.",
            position=n,
        )
        for n in range(INSTRUCTIONS)
    )
    Question.objects.bulk_create(
        (
            Question(instruction=i, position=p + 1, text=f"Q{p}?", constraint_mask=1)
            for i in instructions
            for p in range(QUESTIONS)
        ),
        batch_size=5000,
    )
    systems = System.objects.bulk_create(System(name=f"sys{n}") for n in range(SYSTEMS))
    Response.objects.bulk_create(
        (
            Response(instruction=i, system=s, text="A response.")
            for i in instructions
            for s in systems
        ),
        batch_size=5000,
    )
    annotator = Annotator.objects.create(name="bench judge", kind=AnnotatorKind.LLM)
    endpoint = Endpoint.objects.create(name="bench endpoint", model="fake")
    config = JudgeConfig.objects.create(name="bench judge", annotator=annotator, endpoint=endpoint)
    first = JudgeRun.objects.create(config=config, benchmark=benchmark, status=RunStatus.DONE)
    second = JudgeRun.objects.create(config=config, benchmark=benchmark, status=RunStatus.CANCELLED)
    questions: dict[int, list[int]] = {}
    for pk, instruction_id in Question.objects.order_by("position").values_list(
        "pk", "instruction_id"
    ):
        questions.setdefault(instruction_id, []).append(pk)
    responses = list(Response.objects.order_by("pk").values_list("pk", "instruction_id"))
    Label.objects.bulk_create(
        (
            Label(question_id=q, response_id=r, annotator=annotator, value=1)
            for r, i in responses
            for q in questions[i]
        ),
        batch_size=5000,
    )
    label_of = {
        (q, r): pk for pk, q, r in Label.objects.values_list("pk", "question_id", "response_id")
    }
    for run, answered in ((first, responses), (second, responses[:REPLACED])):
        conversations = JudgeConversation.objects.bulk_create(
            (
                JudgeConversation(
                    run=run,
                    response_id=r,
                    status=ConversationStatus.PENDING
                    if run == second and n >= REPLACED - IN_PART
                    else ConversationStatus.DONE,
                )
                for n, (r, _) in enumerate(answered)
            ),
            batch_size=5000,
        )
        JudgeCall.objects.bulk_create(
            (
                JudgeCall(
                    conversation=c,
                    question_id=q,
                    parsed=1,
                    prompt_version="v1",
                    label_id=label_of[(q, r)],
                )
                for c, (r, i) in zip(conversations, answered, strict=True)
                for q in questions[i][
                    : QUESTIONS // 2 if c.status == ConversationStatus.PENDING else QUESTIONS
                ]
            ),
            batch_size=5000,
        )
    return benchmark


def old_judge_label_runs(*, benchmark_id, annotator_ids=None):
    """The selector as it was (main at e99b490f): every answer row read into Python."""
    from django.db.models import Count, Q

    from evaluation.models import ConversationStatus, JudgeCall, JudgeConversation, JudgeRun
    from evaluation.selectors.judge_label_runs import JudgeLabelRuns, LabelRun

    calls = JudgeCall.objects.filter(
        conversation__run__benchmark_id=benchmark_id, label__isnull=False
    )
    if annotator_ids is not None:
        calls = calls.filter(conversation__run__config__annotator_id__in=annotator_ids)
    setter, before, annotator_of = {}, {}, {}
    for label_id, run_id, response_id, annotator_id in calls.order_by("pk").values_list(
        "label_id",
        "conversation__run_id",
        "conversation__response_id",
        "conversation__run__config__annotator_id",
    ):
        earlier = setter.get(label_id)
        if earlier is not None and earlier[0] != run_id:
            before.setdefault(label_id, set()).add(earlier[0])
        setter[label_id] = (run_id, response_id)
        annotator_of[run_id] = annotator_id
    if not setter:
        return {}
    set_by, replaced = {}, {}
    for label_id, (run_id, response_id) in setter.items():
        set_by.setdefault(run_id, set()).add(response_id)
        for earlier in before.get(label_id, set()) - {run_id}:
            replaced.setdefault(run_id, {}).setdefault(earlier, set()).add(response_id)
    runs = JudgeRun.objects.filter(pk__in=set_by).select_related("engine_run")
    counts = {
        row["run_id"]: row
        for row in JudgeConversation.objects.filter(run_id__in=set_by)
        .values("run_id")
        .annotate(total=Count("id"), done=Count("id", filter=Q(status=ConversationStatus.DONE)))
        .order_by()
    }
    done_responses = set(
        JudgeConversation.objects.filter(
            run_id__in=replaced, status=ConversationStatus.DONE
        ).values_list("run_id", "response_id")
    )
    judges = {}
    for run in sorted(runs, key=lambda run: -run.pk):
        count = counts.get(run.pk, {"total": 0, "done": 0})
        judges.setdefault(annotator_of[run.pk], []).append(
            LabelRun(
                run_id=run.pk,
                status=run.live_status,
                status_display=run.live_status_display,
                responses_done=count["done"],
                responses_total=count["total"],
                replaced={pk: len(found) for pk, found in replaced.get(run.pk, {}).items()},
                answered_in_part=sum(
                    (run.pk, response) not in done_responses
                    for response in set().union(*replaced.get(run.pk, {}).values())
                ),
            )
        )
    return {pk: JudgeLabelRuns(annotator_id=pk, runs=found) for pk, found in judges.items()}


def best_of(select, benchmark_id: int) -> tuple[float, object]:
    found = select(benchmark_id=benchmark_id)
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        select(benchmark_id=benchmark_id)
        times.append(time.perf_counter() - start)
    return min(times), found


def main() -> None:
    url = f"{PG_URL}/{DATABASE}"
    recreate_database(url)
    setup_django({"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings.base"})
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from evaluation.models import JudgeCall
    from evaluation.selectors.judge_label_runs import judge_label_runs

    start = time.perf_counter()
    benchmark = fill()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"filled in {time.perf_counter() - start:.1f} s: {JudgeCall.objects.count()} answer rows")
    print(f"load before: {Path('/proc/loadavg').read_text().split()[:3]}, {os.cpu_count()} cores")
    old, old_found = best_of(old_judge_label_runs, benchmark.pk)
    new, new_found = best_of(judge_label_runs, benchmark.pk)
    assert old_found == new_found, (old_found, new_found)
    with CaptureQueriesContext(connection) as queries:
        found = judge_label_runs(benchmark_id=benchmark.pk)
    (runs,) = found.values()
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")
    print(f"old (rows into Python): best of {RUNS} {old * 1000:.0f} ms")
    print(f"new (aggregate in SQL): best of {RUNS} {new * 1000:.0f} ms, {len(queries)} queries")
    print(f"same result; the note: {runs.note()}")


if __name__ == "__main__":
    main()
