import pytest

from annotate.engine.client import FakeTransport
from annotate.verbalizer.demo import SET_NAME, SYSTEMS, demo_verbalizer_create
from annotate.verbalizer.models import EvaluationSet, HumanAnswer, ModelAnswer, Prompt
from evaluation.verbalizer.figures import FIGURES, figure_available
from evaluation.verbalizer.report import verbalizer_report

pytestmark = pytest.mark.django_db

SMALL, LARGE = SYSTEMS[0][0], SYSTEMS[1][0]


def test_demo_is_idempotent_and_every_figure_has_models_and_people():
    demo_verbalizer_create()
    counts = (Prompt.objects.count(), ModelAnswer.objects.count(), HumanAnswer.objects.count())
    # 2 datasets x 8 items x 12 mappings x 2 modes, answered by 2 fake models;
    # readers: 3 x (2 x 8 x 2 prompts).
    assert counts == (384, 2 * 384, 96)
    demo_verbalizer_create()
    assert (Prompt.objects.count(), ModelAnswer.objects.count(), HumanAnswer.objects.count()) == (
        counts
    )
    report = verbalizer_report(evaluation_set=EvaluationSet.objects.get(name=SET_NAME))
    for name in FIGURES:
        assert figure_available(report, name)
        assert {SMALL, LARGE, "human", "human-majority"} <= {r["system"] for r in report[name]}


def _group_accuracy(report) -> dict[str, dict[str, float]]:
    """Lenient accuracy per system and group (Figure 2's table), on the set's own prompts."""
    found: dict[str, dict[str, float]] = {}
    for row in report["groups"]:
        if row["prompts"] == "set":
            found.setdefault(row["system"], {})[row["group"]] = row["accuracy_lenient"]
    return found


def test_the_demo_fake_models_differ_as_the_paper_finds():
    """The offline fake answered from the prompt alone, so both demo models read the same."""
    demo_verbalizer_create()
    evaluation_set = EvaluationSet.objects.get(name=SET_NAME)
    groups = _group_accuracy(verbalizer_report(evaluation_set=evaluation_set))
    small, large = groups[SMALL], groups[LARGE]
    assert small != large
    assert small["natural"] > small["neutral"] > small["unnatural"]
    gap = {name: g["natural"] - g["unnatural"] for name, g in ((SMALL, small), (LARGE, large))}
    assert gap[LARGE] < gap[SMALL]
    assert large["unnatural"] > small["unnatural"]
    replies = {
        system: dict(
            ModelAnswer.objects.filter(system__name=system).values_list("prompt_id", "reply")
        )
        for system in (SMALL, LARGE)
    }
    assert replies[SMALL].keys() == replies[LARGE].keys()
    assert replies[SMALL] != replies[LARGE]


def test_the_offline_fake_picks_one_of_two_quoted_words(db):
    fake = FakeTransport(options=None)
    direct = 'Answer "foo" if x, and answer "bar" if y. Reply with "foo" or "bar" only.\n\nText: t'
    assert fake.send({"messages": [{"role": "user", "content": direct}]}).text in ("foo", "bar")
    cot = 'End your reply with "The answer is" followed by "foo" or "bar".\n\nText: t'
    reply = fake.send({"messages": [{"role": "user", "content": cot}]}).text
    assert reply.endswith(("The answer is foo.", "The answer is bar."))
