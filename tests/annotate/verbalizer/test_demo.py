import pytest

from annotate.engine.client import FakeTransport
from annotate.verbalizer.demo import SET_NAME, demo_verbalizer_create
from annotate.verbalizer.models import EvaluationSet, HumanAnswer, ModelAnswer, Prompt
from evaluation.verbalizer.figures import FIGURES, figure_available
from evaluation.verbalizer.report import verbalizer_report

pytestmark = pytest.mark.django_db


def test_demo_is_idempotent_and_every_figure_has_models_and_people():
    demo_verbalizer_create()
    counts = (Prompt.objects.count(), ModelAnswer.objects.count(), HumanAnswer.objects.count())
    # 2 datasets x 8 items x 12 mappings x 2 modes; readers: 3 x (2 x 8 x 2 prompts).
    assert counts == (384, 384, 96)
    demo_verbalizer_create()
    assert (Prompt.objects.count(), ModelAnswer.objects.count(), HumanAnswer.objects.count()) == (
        counts
    )
    report = verbalizer_report(evaluation_set=EvaluationSet.objects.get(name=SET_NAME))
    for name in FIGURES:
        assert figure_available(report, name)
        assert {"demo-fake-model", "human", "human-majority"} <= {r["system"] for r in report[name]}


def test_the_offline_fake_picks_one_of_two_quoted_words(db):
    fake = FakeTransport(options=None)
    direct = 'Answer "foo" if x, and answer "bar" if y. Reply with "foo" or "bar" only.\n\nText: t'
    assert fake.send({"messages": [{"role": "user", "content": direct}]}).text in ("foo", "bar")
    cot = 'End your reply with "The answer is" followed by "foo" or "bar".\n\nText: t'
    reply = fake.send({"messages": [{"role": "user", "content": cot}]}).text
    assert reply.endswith(("The answer is foo.", "The answer is bar."))
