"""End to end: load the demo benchmark, judge it with the stub over HTTP, see the judge's labels
as an llm annotator beside the experts'."""

import re

import pytest
from django.urls import reverse

from annotate.models import (
    Annotator,
    AnnotatorKind,
    Benchmark,
    Instruction,
    Label,
    LabelValue,
    System,
)
from annotate.services.demo_data import DEMO_BENCHMARK, demo_benchmark_load
from evaluation.models import RunStatus
from evaluation.services.judge_runs import judge_run_create, judge_run_execute
from tests.evaluation.judge_helpers import make_judge
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db

GENERATED = re.compile(r'\nGenerated Text:\n"(.*)"\n\nQuestion:\n', re.DOTALL)
WORDS = {LabelValue.YES: "YES", LabelValue.NO: "NO", LabelValue.UNKNOWN: "I cannot tell."}


def _answers_like(expert: str) -> dict[tuple[str, str], str]:
    """Return reply text per (response text, question text): what the expert answered.

    Identical pairs that the expert answered differently are left out: no judge could tell them
    apart."""
    labels = Label.objects.filter(annotator__name=expert).select_related("question", "response")
    answers: dict[tuple[str, str], set[str]] = {}
    for lab in labels:
        answers.setdefault((lab.response.text, lab.question.text), set()).add(WORDS[lab.value])
    return {key: value.pop() for key, value in answers.items() if len(value) == 1}


def test_demo_benchmark_judged_through_the_stub_agrees_with_the_expert_it_imitates(
    client, researcher
):
    demo_benchmark_load()
    benchmark = Benchmark.objects.get(name=DEMO_BENCHMARK)
    answers = _answers_like("expert-ana")

    def responder(messages):
        response = GENERATED.search(messages[0]["content"]).group(1)
        question = messages[-1]["content"].rsplit("Question:\n", 1)[1].removesuffix("\n")
        return answers.get((response, question), "YES")

    systems = System.objects.filter(responses__instruction__benchmark=benchmark).distinct()
    assert systems.count() == 3
    with StubOpenAI(responder=responder) as stub:
        judge = make_judge(stub.base_url, name="stub-gpt-4", concurrency=4)
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        judge_run_execute(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    annotator = Annotator.objects.get(name="stub-gpt-4")
    assert annotator.kind == AnnotatorKind.LLM
    labels = Label.objects.filter(annotator=annotator).select_related("question", "response")
    judged = {(lab.response.text, lab.question.text): WORDS[lab.value] for lab in labels}
    assert (
        labels.count()
        == len(stub.answered)
        == sum(
            i.questions.count() * i.responses.count()
            for i in Instruction.objects.filter(benchmark=benchmark)
        )
    )
    assert len(answers) > 20
    assert {key: judged[key] for key in answers} == answers  # every answer in its place

    client.force_login(researcher)
    instruction = benchmark.instructions.first()
    page = client.get(reverse("annotate:instruction-detail", args=[benchmark.pk, instruction.pk]))
    assert "stub-gpt-4" in page.text and "expert-ana" in page.text

    # The report compares the judge with the experts, and its cost comes from the recorded
    # tokens. The judge gives expert-ana's labels (but where ana answered one identical pair
    # two ways); it is measured against the majority of all experts, ana's vote included, and
    # ana's own row against the majority of the others. An item the others decide is decided
    # the same way or tied (left out) once ana's vote is added, and an item they tie is decided
    # by ana's vote: where its labels are ana's, the judge is right wherever ana is and wrong
    # only where ana is.
    report = client.get(reverse("api-report", args=[benchmark.pk])).json()
    sources = {(r["source"], r["subset"]): r for r in report["sources"]}
    judge_row, ana_row = sources[("stub-gpt-4", "overall")], sources[("expert-ana", "overall")]
    assert judge_row["source_kind"] == "llm"
    assert (judge_row["gold"], ana_row["gold"]) == ("expert-majority", "other-experts")
    assert judge_row["acc"] >= ana_row["acc"] > 0
    expected_cost = (
        run.prompt_tokens * float(judge.endpoint.price_prompt_per_1k)
        + run.completion_tokens * float(judge.endpoint.price_completion_per_1k)
    ) / 1000
    assert judge_row["cost_usd"] == pytest.approx(expected_cost, rel=1e-3)
    assert judge_row["time_min"] is not None
    leaderboard = {(r["source"], r["system"], r["subset"]) for r in report["leaderboard"]}
    assert ("stub-gpt-4", "alpha-7b", "overall") in leaderboard
    assert ("expert-majority", "alpha-7b", "overall") in leaderboard
    page = client.get(reverse("reports:detail", args=[benchmark.pk]))
    assert "stub-gpt-4" in page.text
