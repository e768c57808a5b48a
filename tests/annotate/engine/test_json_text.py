"""JsonText: a request body holding texts whose JSON form is kept is sent, and stored, as the
same bytes as json.dumps of the plain texts would give."""

import json

import pytest

from annotate.engine.client import JsonText, RequestBody, body_json
from annotate.engine.models import EngineCall
from annotate.engine.services import engine_call
from annotate.revision.prompting import fill
from tests.annotate.engine.conftest import make_endpoint

TEXTS = [
    "",
    "plain words",
    'quotes " and \\ backslashes \\" and \\\\n',
    "lines\nand\ttabs\r\x01\x1f\x7f and a bell \x07",
    "didn’t — naïve 😀 \u2028 \ud7ff",
    "{examples} {question} {answer} {{examples}} {examples",
    "\\{examples}",  # a backslash just before a placeholder
    "\\u007bexamples}",
]


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


ASCII = "".join(map(chr, range(128)))  # written by the faster ensure_ascii escaper


@pytest.mark.parametrize(
    "text", [*TEXTS, "a nul \x00 (which PostgreSQL cannot store)", ASCII, ASCII + "é"]
)
def test_a_json_text_is_written_as_its_plain_text(text):
    assert b'"' + JsonText(text).escaped + b'"' == dumps(text).encode()


def test_joined_texts_are_written_as_the_joined_plain_texts():
    joined = JsonText.join([JsonText(t) for t in TEXTS] + ["a plain piece\n"])
    assert str(joined) == "".join(TEXTS) + "a plain piece\n"
    assert b'"' + joined.escaped + b'"' == dumps("".join(TEXTS) + "a plain piece\n").encode()


@pytest.mark.parametrize("template", TEXTS + ["Q: {question}\n{examples}\nA: {answer} {question}"])
def test_a_filled_template_is_the_plain_fill_with_a_json_form_to_match(template):
    for values in (
        {"question": TEXTS[2], "answer": "{examples}", "examples": JsonText.join(TEXTS)},
        {"examples": JsonText(TEXTS[3]), "question": "{answer}", "answer": TEXTS[4]},
        {"question": "", "examples": JsonText("")},
        {**BRACELESS, "examples": JsonText.join([JsonText(t) for t in TEXTS[:5]])},
    ):
        plain = template
        for name, value in values.items():  # the prompts' fill: one name after the other
            plain = plain.replace("{" + name + "}", str(value))
        filled = fill(template, values)
        assert isinstance(filled, JsonText)
        assert str(filled) == plain and b'"' + filled.escaped + b'"' == dumps(plain).encode()


def _chain(template, values):
    for name, value in values.items():  # the prompts' fill: one name after the other
        template = template.replace("{" + name + "}", str(value))
    return template


BRACELESS = {"question": "didn’t — naïve 😀", "answer": 'quotes " \\ \n', "rating": "good"}


@pytest.mark.parametrize(
    "template",
    [
        *TEXTS,
        "Q: {question}\nA: {answer} {question}",
        "Q: {question}\nA: {answer} {question}\n# {rating}",
        "no mark",
        "{rating}",
    ],
)
@pytest.mark.parametrize(
    "values",
    [BRACELESS, {"question": "{answer}", "answer": "x"}, {"answer": "", "question": "{"}],
)
def test_a_template_filled_with_plain_texts_is_the_chain_of_replacements(template, values):
    assert fill(template, values) == _chain(template, values)


@pytest.mark.parametrize("examples", ["ans", JsonText("ans")])
def test_a_mark_completed_by_a_filled_value_is_replaced_as_the_chain_does(examples):
    # "{" + "ans" + "wer}" makes "{answer}", which the chain replaces next.
    values = {"examples": examples, "answer": JsonText("X") if examples != "ans" else "X"}
    for template in ("{{examples}wer}", "{{examples}wer} {answer}", "{ans{examples}}"):
        filled = fill(template, values)
        assert str(filled) == _chain(template, values)
        if isinstance(filled, JsonText):
            assert b'"' + filled.escaped + b'"' == dumps(str(filled)).encode()


@pytest.mark.django_db
def test_a_body_with_json_texts_is_the_same_bytes_and_is_sent_and_stored_as_such(stub):
    examples = JsonText.join([JsonText(t) for t in TEXTS])
    messages = [
        {"role": "system", "content": "Rate it."},
        {
            "role": "user",
            "content": fill("{question}\n{examples}", {"question": 'Q"', "examples": examples}),
        },
    ]
    plain = [{"role": m["role"], "content": str(m["content"])} for m in messages]
    body = RequestBody({"model": "m", "messages": messages, "temperature": 0.0, "stop": ["\n"]})
    assert body.json_bytes() == body_json(body) == dumps({**body, "messages": plain}).encode()
    endpoint = make_endpoint(stub.base_url)
    call = engine_call(endpoint=endpoint, messages=messages)
    sent = {"model": "stub-model", "messages": plain, "temperature": endpoint.temperature}
    assert stub.raw_requests == [dumps(sent).encode()]
    assert EngineCall.objects.get(pk=call.pk).request["messages"] == plain


@pytest.mark.django_db
def test_a_batch_stores_each_request_as_the_text_of_the_bytes_sent():
    from django.db import connection
    from django.utils import timezone

    from annotate.engine.services.runs import calls_insert

    endpoint = make_endpoint()
    examples = JsonText.join([JsonText(t) for t in TEXTS])
    sent = RequestBody({"model": "m", "messages": [{"role": "user", "content": examples}]})
    unsent = {"model": "m", "messages": [{"role": "user", "content": "didn’t"}]}  # a plain dict
    calls = [
        EngineCall(endpoint=endpoint, status="error", error="x", request=request)
        for request in (sent, unsent)
    ]
    sent.json_bytes()  # as sending it does
    calls_insert(calls, now=timezone.now())
    stored = EngineCall.objects.filter(pk__in=[c.pk for c in calls]).order_by("pk")
    assert list(stored.values_list("request", flat=True)) == [
        json.loads(sent.json_bytes()),
        unsent,
    ]
    if connection.vendor == "sqlite":  # stored as text, byte for byte what was sent
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT typeof(request), request FROM engine_enginecall WHERE id = %s",
                [calls[0].pk],
            )
            assert cursor.fetchone() == ("text", sent.json_bytes().decode())
