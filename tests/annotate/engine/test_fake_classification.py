"""The offline fake as a classification model of its own skill: told by a FAKE_HINT which word
is right and whether the label words agree with a model's priors, it answers as a model of the
size its name states would, the same every time; prompts without the hint, and every other
prompt, are answered as the fake always answers them, fixed per text and model."""

import pytest

from annotate.engine.client import FAKE_HINT, FakeTransport, TransportOptions, fake_model_skill
from annotate.engine.services import endpoint_request_body
from tests.annotate.engine.conftest import make_endpoint

DIRECT = (
    'Answer "{a}" if the sentiment of the text is "positive", and answer "{b}" if the sentiment '
    'of the text is "negative". Reply with "{a}" or "{b}" only.\n\nText: review {i}\nAnswer:'
)
COT = (
    'Answer "{a}" if the sentiment of the text is "positive", and answer "{b}" if the sentiment '
    'of the text is "negative". End your reply with "The answer is" followed by "{a}" or "{b}".'
    "\n\nText: review {i}\nAnswer: Let's think step by step."
)
# (group, the positive label's word, the negative label's word): Table 1's kinds of mapping.
MAPPINGS = (("natural", "positive", "negative"), ("neutral", "foo", "bar"))
MAPPINGS += (("unnatural", "negative", "positive"),)
ITEMS = range(1, 301)


def ask(model: str, prompt: str, hint: dict | None = None) -> str:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    if hint is not None:
        body[FAKE_HINT] = hint
    return FakeTransport(TransportOptions()).send(body).text


def accuracy(model: str, group: str, template: str = DIRECT) -> float:
    """Share of right answers over 300 items, half positive, under the group's mapping."""
    _, first, second = next(m for m in MAPPINGS if m[0] == group)
    right = 0
    for i in ITEMS:
        expected = first if i % 2 else second
        prompt = template.format(a=first, b=second, i=i)
        reply = ask(model, prompt, {"expected": expected, "group": group, "item": i})
        right += reply.endswith((expected, f"{expected}."))
    return right / len(ITEMS)


def test_two_fake_models_answer_the_same_prompts_differently():
    replies = {
        model: [
            ask(model, DIRECT.format(a="negative", b="positive", i=i), hint)
            for i in ITEMS
            for hint in [{"expected": "negative" if i % 2 else "positive", "group": "unnatural"}]
        ]
        for model in ("fake-1b", "fake-70b")
    }
    assert replies["fake-1b"] != replies["fake-70b"]


def test_the_same_model_answers_the_same_every_time():
    prompt = DIRECT.format(a="foo", b="bar", i=7)
    hint = {"expected": "foo", "group": "neutral", "item": 7}
    assert len({ask("fake-7b", prompt, hint) for _ in range(5)}) == 1
    assert [accuracy("fake-7b", g) for g in ("natural", "neutral", "unnatural")] == [
        accuracy("fake-7b", g) for g in ("natural", "neutral", "unnatural")
    ]


def test_a_small_fake_falls_back_to_its_priors_and_a_large_one_follows_flipped_labels():
    small = {g: accuracy("fake-1b", g) for g in ("natural", "neutral", "unnatural")}
    large = {g: accuracy("fake-70b", g) for g in ("natural", "neutral", "unnatural")}
    assert small["natural"] > small["neutral"] > small["unnatural"]
    assert small["unnatural"] < 0.5 < large["unnatural"]
    assert large["natural"] - large["unnatural"] < small["natural"] - small["unnatural"]
    # Reading: 0.75 + 0.2 * skill of the items right, whatever the model; 300 items.
    for model, found in (("fake-1b", small), ("fake-70b", large)):
        assert found["natural"] == pytest.approx(0.75 + 0.2 * fake_model_skill(model), abs=0.06)


def test_thinking_step_by_step_helps_a_fake_follow_flipped_labels():
    assert accuracy("fake-70b", "unnatural", COT) > accuracy("fake-70b", "unnatural", DIRECT)


def test_the_skill_grows_with_the_size_the_name_states_and_stays_in_range():
    sizes = [fake_model_skill(f"fake-{size}b") for size in (0.5, 1, 7, 70, 540)]
    assert sizes == sorted(sizes)
    assert fake_model_skill("Llama-3-8B-Instruct") == pytest.approx(fake_model_skill("x-8b"), 0.1)
    for model in ("fake", "fake-1", "gpt-4o", "fake-100000b", "fake-0.001b"):
        assert 0.1 <= fake_model_skill(model) <= 0.9


@pytest.mark.parametrize(
    "prompt",
    [
        DIRECT.format(a="foo", b="bar", i=3),
        COT.format(a="0", b="1", i=3),
        "Question: Is the reply polite?\nAnswer YES or NO.",
        "Write a haiku about the sea.",
    ],
)
def test_without_a_hint_each_fake_model_answers_the_same_every_time(prompt):
    """InFoBench, KIWI and any caller that sends no hint get the plain fake's answer: fixed per
    text and model (two models answer apart: test_calls.py)."""
    for model in ("fake-1b", "fake-70b", ""):
        assert ask(model, prompt) == ask(model, prompt)


def test_a_hint_that_does_not_fit_the_prompt_is_ignored():
    prompt = DIRECT.format(a="foo", b="bar", i=3)
    for hint in ({"expected": "baz", "group": "natural"}, {"expected": "foo", "group": "odd"}):
        for model in ("fake-1b", "fake-70b", ""):
            assert ask(model, prompt, hint) == ask(model, prompt)


@pytest.mark.django_db
def test_the_hint_goes_to_the_offline_fake_only():
    hint = {"expected": "foo", "group": "neutral", "item": 1}
    messages = [{"role": "user", "content": "x"}]
    fake = make_endpoint(name="fake")
    served = make_endpoint("http://127.0.0.1:9/v1", name="served")
    params = {FAKE_HINT: hint}
    assert endpoint_request_body(endpoint=fake, messages=messages, params=params)[FAKE_HINT] == hint
    body = endpoint_request_body(endpoint=served, messages=messages, params=params)
    assert set(body) == {"model", "messages", "temperature"}
