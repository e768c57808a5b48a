"""Time and cost of an LLM judge in the report (Table 4): the engine's calls, not its runs' span.

One source: the engine's stored calls of the judge's runs (EngineCall.latency_ms, cost_usd),
failed and retried calls included.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from annotate.engine.models import EngineCall
from annotate.models import Subset
from annotate.selectors.identities import OPERATOR
from evaluation.models import JudgeCall, JudgeRun
from evaluation.services.judge_runs import judge_run_create, judge_run_execute
from evaluation.services.reports import report_build
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import Fail, StubOpenAI

pytestmark = pytest.mark.django_db


def _judge_rows(report: dict, key: str = "time_min") -> dict[str, float | None]:
    return {r["subset"]: r[key] for r in report["sources"] if r["source"] == "fake-judge"}


def _calls_of(response) -> EngineCall:
    return EngineCall.objects.filter(unit_key=f"judge:r{response.pk}")


def test_judge_time_is_the_sum_of_its_call_latencies_not_the_runs_span():
    benchmark, systems, (easy, hard) = make_benchmark(questions_per_instruction=(3, 2))
    hard.subset = Subset.HARD
    hard.save(update_fields=["subset"])
    judge = make_judge(name="fake-judge", backend="fake")
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=run.pk)
    # 3 easy calls of 20 s and 2 hard calls of 45 s: 150 s of calls. The run was resumed after
    # a day's pause, so its first start to last finish spans a day.
    assert _calls_of(easy.responses.get()).count() == 3
    assert _calls_of(hard.responses.get()).count() == 2
    _calls_of(easy.responses.get()).update(latency_ms=20_000)
    _calls_of(hard.responses.get()).update(latency_ms=45_000)
    now = timezone.now()
    JudgeRun.objects.filter(pk=run.pk).update(started_at=now - timedelta(days=1), finished_at=now)

    times = _judge_rows(report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10))

    assert times == {"easy": 1.0, "hard": 1.5, "overall": 2.5}


def test_a_call_answering_several_questions_counts_its_latency_once():
    benchmark, systems, (instruction,) = make_benchmark(questions_per_instruction=(3,))
    judge = make_judge(name="fake-judge", backend="fake", protocol="all_in_one")
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=run.pk)
    assert JudgeCall.objects.filter(conversation__run=run).count() == 3
    EngineCall.objects.filter(run=run.engine_run_id).update(latency_ms=1_200)
    times = _judge_rows(report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10))
    assert times["overall"] == pytest.approx(0.02)  # one call of 1.2 s


def test_failed_calls_count_in_the_judges_time_and_cost():
    """A rejected call took time and a retried reply was paid for: both are the judge's."""
    benchmark, systems, (instruction,) = make_benchmark(questions_per_instruction=(2,))
    with StubOpenAI(replies=[Fail(400, "bad request"), None, "Yes", "No"]) as stub:
        judge = make_judge(
            stub.base_url,
            name="fake-judge",
            protocol="official",
            concurrency=1,
            price_prompt_per_1k=Decimal("1"),
            price_completion_per_1k=Decimal("2"),
        )
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        judge_run_execute(run_id=run.pk, sleep=lambda seconds: None)
    calls = EngineCall.objects.filter(run=run.engine_run_id).order_by("pk")
    assert [c.status for c in calls] == ["error", "error", "ok", "ok"]
    calls.update(latency_ms=6_000)  # 4 calls of 6 s: 0.4 minutes
    # Cost: the stub's usage, priced by the engine per call (the null reply was answered).
    expected = sum(
        Decimal(c.prompt_tokens) * 1 / 1000 + Decimal(c.completion_tokens) * 2 / 1000 for c in calls
    )
    assert calls[1].cost_usd > 0 and expected == sum(c.cost_usd for c in calls)
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    assert _judge_rows(report)["overall"] == pytest.approx(0.4)
    assert _judge_rows(report, "cost_usd")["overall"] == pytest.approx(float(expected), abs=1e-4)


def test_a_later_run_over_some_responses_replaces_the_earlier_runs_cost_and_time_there():
    """A judge run a second time writes over its labels: Table 4 gives what the labels as they
    stand cost (per response, the latest run that finished it), not every run added up."""
    benchmark, systems, (easy, hard) = make_benchmark(questions_per_instruction=(3, 2))
    hard.subset = Subset.HARD
    hard.save(update_fields=["subset"])
    judge = make_judge(name="fake-judge", backend="fake")
    first = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=first.pk)
    EngineCall.objects.filter(run=first.engine_run_id).update(
        latency_ms=60_000, cost_usd=Decimal("1")
    )
    # Again, on the easy instruction only: 3 calls of 2 minutes and $10 each.
    second = judge_run_create(
        config=judge, benchmark=benchmark, systems=systems, instruction_ids=[easy.external_id]
    )
    judge_run_execute(run_id=second.pk)
    assert EngineCall.objects.filter(run=second.engine_run_id).count() == 3
    EngineCall.objects.filter(run=second.engine_run_id).update(
        latency_ms=120_000, cost_usd=Decimal("10")
    )

    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)

    assert _judge_rows(report, "cost_usd") == {"easy": 30.0, "hard": 2.0, "overall": 32.0}
    assert _judge_rows(report) == {"easy": 6.0, "hard": 2.0, "overall": 8.0}


@pytest.mark.parametrize(
    ("latency_ms", "shown"), [(6_000, "0.30"), (800, "0.04"), (50, "&lt;0.01"), (0, "0.00")]
)
def test_the_report_page_shows_a_judges_minutes_under_one_as_such(
    client, admin_user, latency_ms, shown
):
    """18 s of calls is 0.3 minutes, 2.4 s 0.04: the page wrote "0" for both once, and still
    for the second (one decimal at most), which reads as nothing recorded."""
    from django.urls import reverse

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3,))
    judge = make_judge(name="fake-judge", backend="fake")
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=run.pk)
    EngineCall.objects.filter(run=run.engine_run_id).update(latency_ms=latency_ms)
    client.force_login(admin_user)

    page = client.get(reverse("reports:detail", args=[benchmark.pk])).text

    row = next(r for r in page.split("<tr>") if "<td>overall</td><td>fake-judge</td>" in r)
    assert row.split("<td>")[4].startswith(f"{shown}</td>")


def test_a_judges_possibly_billed_attempts_are_shown_beside_its_cost_in_every_format(
    client, admin_user
):
    """Table 4's judge cost is what the stored calls were billed; what their failed attempts
    may also have been billed (a timeout after sending, a 5xx) was nowhere in the report. It is
    now its own figure beside the cost, by the cost's rule (per response, the latest run that
    finished it). Hand-computed: first run $0.25 a call on the 3 easy calls and $0.50 on the 2
    hard ones; the second run over the easy instruction $0.125 on each of its 3 calls, which
    replace the first's there: easy 0.375, hard 1.0, overall 1.375."""
    import json

    from django.urls import reverse

    from evaluation import report_formats

    benchmark, systems, (easy, hard) = make_benchmark(questions_per_instruction=(3, 2))
    hard.subset = Subset.HARD
    hard.save(update_fields=["subset"])
    judge = make_judge(name="fake-judge", backend="fake")
    first = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=first.pk)
    first_calls = EngineCall.objects.filter(run=first.engine_run_id)
    first_calls.update(cost_usd=Decimal("1"))
    _calls_of(easy.responses.get()).update(possibly_billed_usd=Decimal("0.25"))
    _calls_of(hard.responses.get()).update(possibly_billed_usd=Decimal("0.5"))
    second = judge_run_create(
        config=judge, benchmark=benchmark, systems=systems, instruction_ids=[easy.external_id]
    )
    judge_run_execute(run_id=second.pk)
    EngineCall.objects.filter(run=second.engine_run_id).update(
        cost_usd=Decimal("10"), possibly_billed_usd=Decimal("0.125")
    )

    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)

    billed = _judge_rows(report, "possibly_billed_usd")
    assert billed == {"easy": 0.375, "hard": 1.0, "overall": 1.375}
    assert _judge_rows(report, "cost_usd") == {"easy": 30.0, "hard": 2.0, "overall": 32.0}
    # CSV and JSON: a column of its own, beside the cost.
    csv_lines = report_formats.table_csv(report, "sources").splitlines()
    header = csv_lines[0].split(",")
    assert header[header.index("cost_usd") + 1] == "possibly_billed_usd"
    overall = next(line for line in csv_lines if line.startswith("fake-judge,llm,overall"))
    assert ",32.0,1.375," in overall
    rows = json.loads(report_formats.table_json(report, "sources"))
    judged = {r["subset"]: r["possibly_billed_usd"] for r in rows if r["source"] == "fake-judge"}
    assert judged == billed
    # LaTeX and the page: beside the cost, at the cost's two decimals (halves up), said what.
    latex = report_formats.report_latex(report)
    assert r"fake-judge & 32.00 (+1.38) &" in latex
    assert r"fake-judge & 30.00 (+0.38) &" in latex  # easy
    assert "(+x): an LLM judge's failed attempts" in latex
    markdown = report_formats.table_markdown(report, "sources")
    assert "| 32.00 | 1.38 |" in markdown  # the page's decimals
    client.force_login(admin_user)
    page = client.get(reverse("reports:detail", args=[benchmark.pk])).text
    row = next(r for r in page.split("<tr>") if "<td>overall</td><td>fake-judge</td>" in r)
    assert row.split("<td>")[3].startswith('32.00 <span class="possibly-billed"')
    assert "(+1.38)</span></td>" in row.split("<td>")[3]


def test_a_retried_server_error_is_in_the_judges_possibly_billed_amount_not_its_cost():
    """Through the engine: a 500 before the answer is estimated on the stored call (the run's
    possibly_billed_usd is the sum of its calls'), and the report takes it from there."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    with StubOpenAI(replies=[Fail(500, "server error"), "Yes", "No"]) as stub:
        judge = make_judge(
            stub.base_url,
            name="fake-judge",
            concurrency=1,
            price_prompt_per_1k=Decimal("1"),
            price_completion_per_1k=Decimal("2"),
        )
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        judge_run_execute(run_id=run.pk, sleep=lambda seconds: None)
    run.engine_run.refresh_from_db()
    calls = EngineCall.objects.filter(run=run.engine_run_id)
    assert run.engine_run.possibly_billed_usd > 0
    assert sum(c.possibly_billed_usd for c in calls) == run.engine_run.possibly_billed_usd
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    assert _judge_rows(report, "possibly_billed_usd")["overall"] == pytest.approx(
        float(run.engine_run.possibly_billed_usd), abs=1e-4
    )
    assert _judge_rows(report, "cost_usd")["overall"] == pytest.approx(
        float(sum(c.cost_usd for c in calls)), abs=1e-4
    )


def test_a_judge_whose_calls_predate_their_possibly_billed_amounts_reads_unknown_not_zero():
    """Calls stored before the engine kept a possibly billed amount per call (engine 0010) carry
    0, while their run's total kept what the failed attempts may have cost: the report said
    0.0 for such a judge (no "(+x)"), a number that was not known. It now says nothing (null):
    unknown; a run whose calls add up to its total keeps its figure."""
    import json

    from annotate.engine.models import EngineRun
    from evaluation import report_formats

    benchmark, systems, (easy, hard) = make_benchmark(questions_per_instruction=(3, 2))
    hard.subset = Subset.HARD
    hard.save(update_fields=["subset"])
    judge = make_judge(name="fake-judge", backend="fake")
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=run.pk)
    # As stored before 0010: the run's total, none of it on its calls.
    EngineRun.objects.filter(pk=run.engine_run_id).update(possibly_billed_usd=Decimal("0.40"))

    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    assert _judge_rows(report, "possibly_billed_usd") == {
        "easy": None,
        "hard": None,
        "overall": None,
    }
    rows = json.loads(report_formats.table_json(report, "sources"))
    assert [r["possibly_billed_usd"] for r in rows if r["source"] == "fake-judge"] == [None] * 3

    # Stored per call since: the calls hold the run's total, and the figure is theirs.
    _calls_of(easy.responses.get()).update(possibly_billed_usd=Decimal("0.10"))
    _calls_of(hard.responses.get()).update(possibly_billed_usd=Decimal("0.05"))
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    assert _judge_rows(report, "possibly_billed_usd") == {"easy": 0.3, "hard": 0.1, "overall": 0.4}
