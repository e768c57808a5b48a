"""The `official` judge protocol against the official evaluation.py itself, on the same stub.

The script (../shared/reference/infobench/evaluation.py, qinyiwei/InfoBench at 557fba0, MIT) runs
unmodified: a stand-in replaces its unused `tiktoken` import, OPENAI_BASE_URL points its client at
the stub, and its 20 s sleeps between retries are recorded instead of slept. Then the app's judge
in `official` mode answers the same script of replies, and both must have sent the same request
bytes and concluded the same answers.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import sys
import types
from argparse import Namespace
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from annotate.models import Label, LabelValue
from annotate.selectors.identities import OPERATOR
from evaluation.judges import prompting as p
from evaluation.judges.official import OFFICIAL_PROMPT_VERSION, parse_official
from evaluation.judges.parsing import NO, UNKNOWN, YES
from evaluation.models import JudgeCall, JudgeConversation, JudgeRun, RunStatus
from evaluation.selectors.judge_runs import judge_run_progress
from evaluation.services.judge_runs import judge_run_create, judge_run_execute
from evaluation.services.reports import report_build
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import Fail, StubOpenAI

pytestmark = pytest.mark.django_db

REFERENCE = Path(settings.BASE_DIR).parent / "shared" / "reference" / "infobench"
MODEL = "judge-model"
INPUTS = ["The input.", "", "", ""]
QUESTIONS = (3, 3, 2, 2)
# One list of replies for both runs, consumed request by request.
REPLIES = [
    # task_1: YES by prefix; " Yes" (a leading space, no capitals) is unparseable: the third
    # question is never asked.
    "Yes, it does.",
    " Yes",
    # task_2: an HTTP 400 is retried with the same body; "NO." is NO; a null content goes into
    # the history and the call is retried; "... YES" is YES by the capitals; "" is unparseable.
    Fail(400, "bad request"),
    "NO.",
    None,
    "The answer is YES",
    "",
    # task_3: "Not really" starts with "no": NO; both capitals, no prefix: unparseable.
    "Not really",
    "Both YES and NO",
    # task_4: answered in full.
    "yes",
    "I think NO",
]
EXPECTED = [[True, None], [False, True, None], [False, None], [True, False]]


def _load_official_script(monkeypatch) -> types.ModuleType:
    path = REFERENCE / "evaluation.py"
    if not path.exists():
        pytest.skip("../shared/reference/infobench is not beside the checkout")
    tiktoken = types.ModuleType("tiktoken")
    tiktoken.get_encoding = lambda name: None  # the script never uses the encoder
    monkeypatch.setitem(sys.modules, "tiktoken", tiktoken)
    spec = importlib.util.spec_from_file_location("infobench_official_evaluation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.time = types.SimpleNamespace(sleep=lambda seconds: module.slept.append(seconds))
    module.slept = []
    return module


def _run_official_script(monkeypatch, tmp_path, instructions, responses) -> tuple:
    module = _load_official_script(monkeypatch)
    entries = [
        {
            "id": instruction.external_id,
            "input": instruction.input_text,
            "output": response.text,
            "decomposed_questions": list(
                instruction.questions.order_by("position").values_list("text", flat=True)
            ),
        }
        for instruction, response in zip(instructions, responses, strict=True)
    ]
    source = tmp_path / "outputs.jsonl"
    source.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    (tmp_path / "out").mkdir()
    with StubOpenAI(replies=list(REPLIES)) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        # As `python evaluation.py --api_key K --model M --input F --output_dir D` parses it.
        module.main_run(
            Namespace(
                api_key="unused",
                model=MODEL,
                input=str(source),
                output_dir=str(tmp_path / "out"),
                temperature=0,
            )
        )
    written = tmp_path / "out" / MODEL / f"{str(source).split('/')[1]}_DecomposeEval.json"
    evals = [json.loads(line)["eval"] for line in written.read_text().splitlines()]
    return stub.raw_requests, evals, module.slept


def _benchmark():
    benchmark, systems, instructions = make_benchmark(
        questions_per_instruction=QUESTIONS, inputs=INPUTS
    )
    responses = [instruction.responses.get() for instruction in instructions]
    return benchmark, systems, instructions, responses


def _app_answers(instructions, responses) -> list[list[bool | None]]:
    """The judge's labels per conversation in question order, up to the last asked question."""
    names = {LabelValue.YES: True, LabelValue.NO: False, LabelValue.UNKNOWN: None}
    answers = []
    for instruction, response in zip(instructions, responses, strict=True):
        labels = dict(
            Label.objects.filter(response=response).values_list("question__position", "value")
        )
        asked = [names[labels[position]] for position in sorted(labels)]
        assert sorted(labels) == list(range(1, len(labels) + 1)), "asked in order, none skipped"
        assert len(labels) <= instruction.questions.count()
        answers.append(asked)
    return answers


def test_official_protocol_matches_the_official_script_byte_for_byte(monkeypatch, tmp_path):
    benchmark, systems, instructions, responses = _benchmark()
    script_requests, script_evals, slept = _run_official_script(
        monkeypatch, tmp_path, instructions, responses
    )
    assert script_evals == EXPECTED  # the script read the replies as this test expects
    assert slept == [20, 20]  # after the HTTP 400 and after the null content

    with StubOpenAI(replies=list(REPLIES)) as stub:
        judge = make_judge(
            stub.base_url, model=MODEL, protocol="official", concurrency=1, max_retries=3
        )
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        waits = []
        run = judge_run_execute(run_id=run.pk, sleep=waits.append)
    app_requests = stub.raw_requests

    assert len(app_requests) == len(script_requests) == 11
    for index, (ours, theirs) in enumerate(zip(app_requests, script_requests, strict=True)):
        assert ours == theirs, f"request {index + 1} differs"
    assert _app_answers(instructions, responses) == script_evals
    assert len(waits) == 2
    assert run.status == RunStatus.DONE and run.prompt_version == OFFICIAL_PROMPT_VERSION


def test_official_requests_carry_model_messages_and_temperature_only(monkeypatch, tmp_path):
    benchmark, systems, instructions, responses = _benchmark()
    with StubOpenAI(replies=list(REPLIES)) as stub:
        judge = make_judge(stub.base_url, model=MODEL, protocol="official", concurrency=1)
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        judge_run_execute(run_id=run.pk, sleep=lambda seconds: None)
    bodies = stub.requests
    assert all(list(body) == ["model", "messages", "temperature"] for body in bodies)
    assert all(body["temperature"] == 0 and body["model"] == MODEL for body in bodies)
    assert (
        b'"temperature": 0}' in stub.raw_requests[0]
        or b'"temperature":0}' in (stub.raw_requests[0])
    )
    # task_1: SYS_MSG with its typos and trailing quotes, the input, the response, question 1;
    # then the bare second question plus a newline.
    rules = p.load_prompt(OFFICIAL_PROMPT_VERSION).sections["rules"]
    assert rules.endswith("Consequently, the answer should be 'NO'.'''")
    assert "As an illustration. consider a question that asks." in rules
    first = bodies[0]["messages"]
    assert first == [
        {
            "role": "user",
            "content": f'{rules}\n\nInput:\n"The input."\n\nGenerated Text:\n'
            f'"sys-a answer 1"\n\nQuestion:\ntask_1 question 1?\n',
        }
    ]
    assert bodies[1]["messages"][1:] == [
        {"role": "assistant", "content": "Yes, it does."},
        {"role": "user", "content": "task_1 question 2?\n"},
    ]
    # task_2, question 2 retried after a null reply: the null turn stays in the history.
    assert bodies[5]["messages"][-2:] == [
        {"role": "user", "content": "task_2 question 2?\n"},
        {"role": "assistant", "content": None},
    ]


def test_unasked_questions_are_stored_as_not_asked_and_counted_by_each_convention(
    monkeypatch, tmp_path
):
    benchmark, systems, instructions, responses = _benchmark()
    with StubOpenAI(replies=list(REPLIES)) as stub:
        judge = make_judge(stub.base_url, model=MODEL, protocol="official", concurrency=1)
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        run = judge_run_execute(run_id=run.pk, sleep=lambda seconds: None)
    not_asked = dict(
        JudgeConversation.objects.filter(run=run).values_list(
            "response__instruction__external_id", "questions_not_asked"
        )
    )
    assert not_asked == {"task_1": 1, "task_2": 0, "task_3": 0, "task_4": 0}
    assert JudgeCall.objects.filter(conversation__run=run).count() == 9
    progress = judge_run_progress(run=run)
    assert (progress.questions_total, progress.questions_answered) == (10, 9)
    assert (progress.questions_not_asked, progress.questions_missing, progress.percent) == (
        1,
        0,
        100,
    )
    retried = JudgeCall.objects.filter(conversation__run=run, retries=1).count()
    assert retried == 2  # task_2's 400 and its null reply
    # The script's bool_ratio: 3 True of 9 entries. Equation 1: 3 of 10 questions. Appendix
    # A.3: 3 of the 6 YES/NO answers.
    counts = {}
    for unknown in ("official", "no", "exclude"):
        report = report_build(scope=OPERATOR, benchmark=benchmark, unknown=unknown, n_resamples=10)
        (row,) = [
            r
            for r in report["leaderboard"]
            if r["source"] == judge.name and r["subset"] == "overall"
        ]
        counts[unknown] = (row["yes"], row["questions"])
    assert counts == {"official": (3, 9), "no": (3, 10), "exclude": (3, 6)}


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("Yes", YES),
        ("yes.", YES),
        ("YES, it does", YES),
        ("No", NO),
        ("Not really", NO),  # starts with "no"
        ("Nothing here", NO),
        ("I would say YES", YES),
        ("I would say NO", NO),
        ("The answer: NOT met", NO),  # NOT contains NO
        (" Yes", UNKNOWN),  # a leading space: no prefix, no capitals
        ("", UNKNOWN),
        ("I would say yes", UNKNOWN),  # lower case is not the capitals rule
        ("YES and NO", YES),  # the prefix rule comes first
        ("Both YES and NO", UNKNOWN),
        ("KNOW YES", UNKNOWN),  # NO inside KNOW
    ],
)
def test_parse_official_is_the_scripts_rule(reply, label):
    assert parse_official(reply) == label


def test_official_protocol_from_the_commands(monkeypatch, capsys):
    benchmark, systems, instructions, responses = _benchmark()
    with StubOpenAI(replies=list(REPLIES)) as stub:
        call_command(
            "judge_config",
            "official-judge",
            "--backend",
            "openai",
            "--base-url",
            stub.base_url,
            "--model",
            MODEL,
            "--api-key-env",
            "",
            "--protocol",
            "official",
            "--concurrency",
            "1",
            "--max-retries",
            "3",
        )
        monkeypatch.setattr("time.sleep", lambda seconds: None)
        call_command("judge", config="official-judge", benchmark=benchmark.name)
    out = capsys.readouterr().out
    assert "9/10 questions (1 not asked after an unparseable answer)" in out
    run = JudgeRun.objects.get()
    assert (run.protocol, run.prompt_version) == ("official", OFFICIAL_PROMPT_VERSION)
    assert _app_answers(instructions, responses) == EXPECTED
    assert all("max_tokens" not in body for body in stub.requests)


def test_the_official_protocol_refuses_another_prompt():
    from evaluation.errors import JudgeRunError

    benchmark, systems, _, _ = _benchmark()
    judge = make_judge(protocol="official", backend="fake")
    with pytest.raises(JudgeRunError, match="uses the prompt infobench_official"):
        judge_run_create(
            config=judge, benchmark=benchmark, systems=systems, prompt_version="infobench_v1"
        )
    all_in_one = make_judge(name="all-in-one", protocol="all_in_one", backend="fake")
    with pytest.raises(JudgeRunError, match="no sections for the all_in_one protocol"):
        judge_run_create(
            config=all_in_one,
            benchmark=benchmark,
            systems=systems,
            prompt_version=OFFICIAL_PROMPT_VERSION,
        )


def test_the_official_prompt_file_holds_the_scripts_sys_msg_verbatim():
    path = REFERENCE / "evaluation.py"
    if not path.exists():
        pytest.skip("../shared/reference/infobench is not beside the checkout")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (sys_msg,) = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SYS_MSG"
    ]
    assert p.load_prompt(OFFICIAL_PROMPT_VERSION).sections["rules"] == sys_msg
    text = (p.PROMPTS_DIR / f"{OFFICIAL_PROMPT_VERSION}.txt").read_text(encoding="utf-8")
    assert "557fba0" in text and "MIT License" in text and "qinyiwei" in text


def test_a_replacing_run_that_stops_early_leaves_no_earlier_label_on_the_questions_it_never_asked():
    """Run 1 answers every question YES; run 2 replaces it with the script's replies above, and
    stops early on task_1 (its third question never asked). The script's file of run 2 has 3
    True of 9 entries; the report counted run 1's YES on that unasked question beside run 2's
    answers (4 of 10 under `official`): a DRFR of no run at all."""
    benchmark, systems, instructions, responses = _benchmark()
    first = ["Yes"] * sum(QUESTIONS)
    with StubOpenAI(replies=first + list(REPLIES)) as stub:
        judge = make_judge(stub.base_url, model=MODEL, protocol="official", concurrency=1)
        arguments = ["--config", judge.name, "--benchmark", benchmark.name]
        call_command("judge", *arguments, stdout=io.StringIO())
        call_command("judge", *arguments, stdout=io.StringIO())
    assert _app_answers(instructions, responses) == EXPECTED
    counts = {}
    for unknown in ("official", "no", "exclude"):
        report = report_build(scope=OPERATOR, benchmark=benchmark, unknown=unknown, n_resamples=10)
        (row,) = [
            r
            for r in report["leaderboard"]
            if r["source"] == judge.name and r["subset"] == "overall"
        ]
        counts[unknown] = (row["yes"], row["questions"])
    assert counts == {"official": (3, 9), "no": (3, 10), "exclude": (3, 6)}
