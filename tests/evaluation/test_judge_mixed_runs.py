"""A run replacing a judge's earlier labels overwrites each as soon as it is answered: stopped
part-way, it leaves the judge's labels from two runs until it is resumed. The report says so
for that judge in every format and marks its figures provisional; the run's page says the
labels are mixed. A replacing run that finished leaves no such note."""

import io
import json
import threading
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db.models import Sum
from django.urls import reverse

from annotate.engine.models import EngineCall
from evaluation.models import ConversationStatus, JudgeConversation, JudgeRun
from evaluation.report_formats import latex_escape
from evaluation.services.judge_runs import judge_run_create, judge_run_execute
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db

PRICE = {"price_prompt_per_1k": Decimal("0.03"), "price_completion_per_1k": Decimal("0.06")}
FORMATS = ("json", "csv", "latex", "md")


@pytest.fixture
def stub():
    with StubOpenAI() as server:
        yield server


def _replaced_then_stopped(stub):
    """Two systems on instructions of 3 and 2 questions: 4 responses, 10 questions. The first
    run judges them all; the second, one call at a time, is stopped at its 5th call: it
    finishes the first response (3 questions) and answers 2 of the second's 3, then stops."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(stub.base_url, concurrency=1, **PRICE)
    first = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=first.pk, sleep=lambda seconds: None)
    second = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    stop = threading.Event()
    stub.on_request = lambda count: stop.set() if count == 10 + 5 else None
    judge_run_execute(run_id=second.pk, stop=stop, sleep=lambda seconds: None)
    stub.on_request = None
    second.refresh_from_db()
    assert second.live_status == "cancelled"
    done = JudgeConversation.objects.filter(run=second, status=ConversationStatus.DONE)
    assert done.count() == 1
    return benchmark, first, second


def _report(benchmark, fmt: str) -> str:
    out = io.StringIO()
    call_command("report", "--benchmark", benchmark.name, "--format", fmt, stdout=out)
    return out.getvalue()


def _note(first: JudgeRun, second: JudgeRun) -> str:
    # 1 of 4 responses done; it overwrote labels of the first run on 2 responses (the one it
    # finished, and 2 of the 3 questions of the next).
    return (
        f"Provisional (stub-judge): labels from 2 runs: #{second.pk} (stopped, 1 of 4 "
        f"responses) replaced #{first.pk} on 2 responses; resume run #{second.pk} to finish. "
        "Until then its figures are provisional, and its cost and time in Table 4 are those "
        "of the run that last finished each response (1 response answered only in part by "
        "the unfinished run: costed by the earlier run that finished it)."
    )


def test_a_replacing_run_stopped_part_way_is_said_in_every_format(stub):
    benchmark, first, second = _replaced_then_stopped(stub)
    note = _note(first, second)

    texts = {fmt: _report(benchmark, fmt) for fmt in FORMATS}

    report = json.loads(texts["json"])
    assert report["provisional"] == [{"source": "stub-judge", "note": note.split(": ", 1)[1]}]
    for table in ("leaderboard", "sources"):
        assert {row["provisional"] for row in report[table]} == {True}  # all the judge's
    assert texts["csv"].startswith(f"# note: {note}\r\n# dataset\r\n")
    assert "provisional\r\n" in texts["csv"] and ",true\r\n" in texts["csv"]
    assert texts["latex"].count(latex_escape(note)) == 3  # the header, Tables 5 and 4
    assert texts["md"].count(f"\n\n{note}\n") == 2  # under the leaderboard and Table 4
    # Table 4's cost is the run that finished each response: the second's calls on its one
    # finished response, the first's on the other three (the one answered in part with them).
    by_second = set(
        JudgeConversation.objects.filter(run=second, status=ConversationStatus.DONE).values_list(
            "response_id", flat=True
        )
    )
    everything = set(
        JudgeConversation.objects.filter(run=first).values_list("response_id", flat=True)
    )
    counted = {(second.engine_run_id, pk) for pk in by_second}
    counted |= {(first.engine_run_id, pk) for pk in everything - by_second}
    calls = EngineCall.objects.filter(run_id__in=[first.engine_run_id, second.engine_run_id])
    cost = sum(
        (c.cost_usd for c in calls if (c.run_id, int(c.unit_key.partition(":r")[2])) in counted),
        Decimal(0),
    )
    judge_row = next(r for r in report["sources"] if r["subset"] == "overall")
    assert judge_row["cost_usd"] == pytest.approx(float(cost), abs=1e-4)
    assert calls.aggregate(total=Sum("cost_usd"))["total"] > cost


def test_the_report_page_and_the_run_page_say_it(stub, client, researcher):
    benchmark, first, second = _replaced_then_stopped(stub)
    client.force_login(researcher)

    report = client.get(reverse("reports:detail", args=[benchmark.pk])).content.decode()
    run_page = client.get(reverse("judge:run-detail", args=[second.pk])).content.decode()
    first_page = client.get(reverse("judge:run-detail", args=[first.pk])).content.decode()

    note = _note(first, second)
    assert 'id="provisional-note"' in report and note in report
    assert '<span class="provisional">provisional</span>' in report
    assert 'id="run-mixed"' in run_page
    assert (
        f"The labels of this judge on {benchmark.name} are mixed until this run is resumed: "
        f"labels from 2 runs: #{second.pk} (stopped, 1 of 4 responses) replaced "
        f"#{first.pk} on 2 responses; resume run #{second.pk} to finish."
    ) in run_page
    assert 'id="run-mixed"' not in first_page  # the run replaced, done: nothing to resume


def test_a_replacing_run_resumed_to_the_end_leaves_no_note(stub, client, researcher):
    benchmark, _, second = _replaced_then_stopped(stub)
    judge_run_execute(run_id=second.pk, sleep=lambda seconds: None)
    second.refresh_from_db()
    assert second.live_status == "done"
    client.force_login(researcher)

    texts = {fmt: _report(benchmark, fmt) for fmt in FORMATS}
    report = client.get(reverse("reports:detail", args=[benchmark.pk])).content.decode()
    run_page = client.get(reverse("judge:run-detail", args=[second.pk])).content.decode()

    assert json.loads(texts["json"])["provisional"] == []
    assert {row["provisional"] for row in json.loads(texts["json"])["leaderboard"]} == {False}
    assert all("Provisional" not in text and "# note:" not in text for text in texts.values())
    assert 'id="provisional-note"' not in report and "provisional</span>" not in report
    assert 'id="run-mixed"' not in run_page
