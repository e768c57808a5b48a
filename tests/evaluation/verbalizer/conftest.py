import pytest

from annotate.models import Annotator, System
from annotate.verbalizer.models import HumanAnswer, HumanStudy, ModelAnswer, Prompt, SystemRun
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill


def answer(run, prompt, reply):
    return ModelAnswer.objects.create(prompt=prompt, system=run.system, run=run, reply=reply)


@pytest.fixture
def small_set(db):
    """SST-2 with items 1 (positive) and 2 (negative); golden, flipped-golden, foo|bar; both modes.

    Model m1 (size 7): golden direct: right on both; flipped-golden direct: item 1 "positive"
    (wrong: expected "negative"), item 2 "I cannot tell" (invalid under both rules);
    foo|bar direct: item 1 "The answer is foo" (strict invalid, lenient right), item 2 "foo"
    (wrong); flipped-golden cot: item 1 "... the answer is negative" (lenient right, strict
    invalid), item 2 "... answer: negative" (lenient wrong).
    """
    fill("SST-2", [True, False])
    s = evaluation_set_create(
        name="small", datasets=["SST-2"], items=2, seed=1,
        mappings="golden,flipped-golden,foo|bar", modes=["direct", "cot"],
    ).evaluation_set  # fmt: skip
    run = SystemRun.objects.create(
        evaluation_set=s, system=System.objects.create(name="m1"), endpoint_name="stub",
        model_size_b=7,
    )  # fmt: skip
    replies = {
        ("golden", "direct", 1): "positive",
        ("golden", "direct", 2): "Negative.",
        ("flipped-golden", "direct", 1): "positive",
        ("flipped-golden", "direct", 2): "I cannot tell",
        ("foo|bar", "direct", 1): "The answer is foo",
        ("foo|bar", "direct", 2): "foo",
        ("flipped-golden", "cot", 1): "It praises. So the answer is negative",
        ("flipped-golden", "cot", 2): "It pans. Answer: negative",
    }
    for (mapping, mode, position), reply in replies.items():
        prompt = Prompt.objects.get(
            evaluation_set=s, mapping__name=mapping, mode=mode, item__position=position
        )
        answer(run, prompt, reply)
    return s


@pytest.fixture
def with_humans(small_set):
    """Three people on the flipped-golden direct prompts: item 1 (expected "negative"): two say
    "negative", one "positive"; item 2 (expected "positive"): two say "negative", one "positive".
    """
    study = HumanStudy.objects.create(name="h", evaluation_set=small_set, answers_per_prompt=3)
    prompts = {
        p.item.position: p
        for p in Prompt.objects.filter(
            evaluation_set=small_set, mapping__name="flipped-golden", mode="direct"
        )
    }
    study.prompts.set(prompts.values())
    words = {1: ["negative", "negative", "positive"], 2: ["negative", "positive", "negative"]}
    for k in range(3):
        person = Annotator.objects.create(name=f"p{k}", kind="expert")
        for position, choices in words.items():
            HumanAnswer.objects.create(
                study=study, prompt=prompts[position], annotator=person, word=choices[k],
                seconds=3.0,
            )  # fmt: skip
    return small_set
