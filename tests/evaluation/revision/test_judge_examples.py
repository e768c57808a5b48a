"""A few-shot judge's examples: picked by BM25 as the run loads its turns (the first calls'
turns first), stored on the run, and exactly what each call's prompt shows."""

import json
import random
import re

import pytest
from django.utils import timezone

from annotate.engine.models import EngineCall
from annotate.revision.models import Study, Turn
from annotate.revision.services.imports import sessions_import
from evaluation.revision.judges import (
    ExamplePicker,
    examples_pick,
    judge_run_create,
    judge_run_examples_add,
    judge_run_execute,
)
from evaluation.revision.models import RevisionJudgeRun
from tests.annotate.engine.conftest import make_endpoint
from tests.evaluation.openai_stub import StubOpenAI
from tests.evaluation.revision.sample import sample_study
from tests.evaluation.revision.sample import turn as session_turn

pytestmark = pytest.mark.django_db


def ids(study):
    return dict(Turn.objects.filter(session__study=study).values_list("instruction", "id"))


def k_shot_run(study, endpoint_name="judge-stub"):
    # Seed 1 splits the sample's six turns: test = "Add an example of results."; train =
    # "Shorten the answer.", "Delete the last sentence.", "Give results from all papers.",
    # "Move paragraph two up." (dev: "Tell me more.").
    return judge_run_create(
        study=study,
        task="rating-judge",
        mode="k-shot",
        shots=2,
        endpoint_name=endpoint_name,
        seed=1,
        now=timezone.now(),
    )


def sent_instructions(prompt):
    """The instructions of a prompt's examples, in their order (the last one is the test turn's)."""
    return re.findall(r"# Instruction:\n# (.*)\n", prompt)[:-1]


def test_a_k_shot_run_stores_the_bm25_examples_of_each_test_turn_and_sends_them(tmp_path):
    study = sample_study(tmp_path)
    turn = ids(study)
    run = k_shot_run(study)
    assert sorted(run.split["test"]) == [turn["Add an example of results."]]
    assert run.examples == {}  # creating a run (the web request) picks nothing
    with StubOpenAI(replies=["good"]) as stub:
        make_endpoint(stub.base_url, name="judge-stub", concurrency=2)
        run = judge_run_execute(run_id=run.pk)
    assert run.status == "done"
    # Only "Give results from all papers." shares a word ("results") with the test
    # instruction; the second example is the first training turn by id, all others scoring 0.
    expected = [turn["Give results from all papers."], turn["Shorten the answer."]]
    assert run.examples == {str(turn["Add an example of results."]): expected}
    prompt = stub.requests[0]["messages"][-1]["content"]
    assert sent_instructions(prompt) == [
        "Give results from all papers.",
        "Shorten the answer.",
    ]
    # The stored request of the call is the one sent: the examples stay auditable per call.
    stored = EngineCall.objects.get(run=run.engine_run).request
    assert stored["messages"] == stub.requests[0]["messages"]
    assert list(run.predictions.values_list("label", flat=True)) == ["good"]


def test_a_run_started_again_keeps_its_stored_examples(tmp_path):
    study = sample_study(tmp_path)
    turn = ids(study)
    run = k_shot_run(study)
    chosen = [turn["Move paragraph two up."], turn["Delete the last sentence."]]
    RevisionJudgeRun.objects.filter(pk=run.pk).update(
        examples={str(turn["Add an example of results."]): chosen}
    )
    with StubOpenAI(replies=["bad"]) as stub:
        make_endpoint(stub.base_url, name="judge-stub", concurrency=2)
        run = judge_run_execute(run_id=run.pk)
    assert run.examples[str(turn["Add an example of results."])] == chosen
    prompt = stub.requests[0]["messages"][-1]["content"]
    assert sent_instructions(prompt) == [
        "Move paragraph two up.",
        "Delete the last sentence.",
    ]
    assert list(run.predictions.values_list("label", flat=True)) == ["bad"]


def test_the_offline_fake_model_stores_the_same_examples(tmp_path):
    study = sample_study(tmp_path)
    turn = ids(study)
    run = judge_run_execute(run_id=k_shot_run(study, endpoint_name="").pk)
    assert run.examples == {
        str(turn["Add an example of results."]): [
            turn["Give results from all papers."],
            turn["Shorten the answer."],
        ]
    }


def test_a_zero_shot_run_stores_no_examples(tmp_path):
    study = sample_study(tmp_path)
    run = judge_run_create(
        study=study, task="rating-judge", mode="zero-shot", seed=1, now=timezone.now()
    )
    assert judge_run_execute(run_id=run.pk).examples == {}


def test_celery_chunks_use_the_examples_stored_when_the_run_was_dispatched(
    tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    from annotate.engine.services.runs import engine_run_chunk_execute, engine_run_dispatch
    from evaluation.revision import judges
    from evaluation.revision.judges import _engine_run_attach

    study = sample_study(tmp_path)
    turn = ids(study)
    with StubOpenAI(replies=["good"]) as stub:
        endpoint = make_endpoint(stub.base_url, name="judge-stub", concurrency=2)
        run = k_shot_run(study)
        engine_run = _engine_run_attach(run, endpoint)
        with django_capture_on_commit_callbacks():
            (chunk,) = engine_run_dispatch(run_id=engine_run.pk, chunk_units=10)
        run.refresh_from_db()
        expected = [turn["Give results from all papers."], turn["Shorten the answer."]]
        assert run.examples == {str(turn["Add an example of results."]): expected}

        def no_index(*args, **kwargs):
            raise AssertionError("a chunk ranked the training turns again")

        monkeypatch.setattr(judges, "BM25Index", no_index)
        engine_run_chunk_execute(chunk_id=chunk.pk, task_id="t-1")
    run.refresh_from_db()
    assert run.status == "done"
    prompt = stub.requests[0]["messages"][-1]["content"]
    assert sent_instructions(prompt) == ["Give results from all papers.", "Shorten the answer."]


WORDS = [
    "add",
    "shorten",
    "results",
    "answer",
    "papers",
    "example",
    "sentence",
    "paragraph",
    "delete",
    "move",
]


def tied_study(tmp_path, sessions=12):
    """A study of `sessions` x 5 rated turns whose instructions draw from ten words: many
    training turns tie on their BM25 scores, and some test turns share an instruction."""
    rng = random.Random(7)
    rows = [
        {
            "original_question": f"Q{n}?",
            "model_name": "gpt-4",
            "initial_answer": f"a{n}",
            "interaction": [
                session_turn(
                    " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))) + ".",
                    "stylistic",
                    rng.choice(["good", "neutral", "bad"]),
                )
                for _ in range(5)
            ],
        }
        for n in range(sessions)
    ]
    path = tmp_path / "tied.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sessions_import(path=str(path), study_name="tied")
    return Study.objects.get(name="tied")


def test_examples_picked_a_slice_at_a_time_are_those_picked_at_once(tmp_path):
    run = k_shot_run(tied_study(tmp_path))
    test = sorted(run.split["test"])
    assert len(test) >= 6
    at_once = examples_pick(run)
    picker = ExamplePicker(run)
    slices = picker.pick(test[:2]) | picker.pick(test[4:]) | picker.pick(test[2:4])
    assert {turn: slices[turn] for turn in sorted(slices, key=int)} == at_once
    assert list(at_once) == [str(turn) for turn in test]


def test_an_engine_run_ranks_its_first_calls_turns_first_and_stores_every_pick(
    tmp_path, monkeypatch
):
    run = k_shot_run(tied_study(tmp_path))
    expected = examples_pick(run)
    ranked = []
    pick = ExamplePicker.pick
    monkeypatch.setattr(
        ExamplePicker, "pick", lambda self, ids: ranked.append(ids) or pick(self, ids)
    )
    with StubOpenAI(replies=["good"] * 20) as stub:
        make_endpoint(stub.base_url, name="judge-stub", concurrency=2)
        run = judge_run_execute(run_id=run.pk)
    assert run.status == "done"
    test = sorted(run.split["test"])
    assert ranked == [test[:2], test[2:]]  # the first two calls' turns, then the rest
    assert run.examples == expected and list(run.examples) == list(expected)
    turn_instruction = dict(Turn.objects.values_list("id", "instruction"))
    by_turn = {
        int(call.unit_key.rsplit(":turn", 1)[1]): call.request["messages"][-1]["content"]
        for call in EngineCall.objects.filter(run=run.engine_run)
    }
    for turn_id, prompt in by_turn.items():
        shown = sent_instructions(prompt)
        assert shown == [turn_instruction[pk] for pk in expected[str(turn_id)]]


def test_added_examples_keep_those_stored_and_the_test_turn_order(tmp_path):
    run = k_shot_run(sample_study(tmp_path))
    RevisionJudgeRun.objects.filter(pk=run.pk).update(examples={"12": [1], "3": [2]})
    judge_run_examples_add(run_id=run.pk, picks={"12": [9], "5": [4], "20": [6]})
    run.refresh_from_db()
    assert run.examples == {"3": [2], "5": [4], "12": [1], "20": [6]}
    assert list(run.examples) == ["3", "5", "12", "20"]


def test_runs_on_the_same_training_turns_rank_them_with_one_index_and_an_edit_makes_another(
    tmp_path, monkeypatch
):
    from evaluation.revision import judges

    judges.training_index.cache_clear()
    built = []
    index = judges.BM25Index
    monkeypatch.setattr(judges, "BM25Index", lambda texts: built.append(texts) or index(texts))
    turn = ids(sample_study(tmp_path))
    study = Study.objects.get()
    ten_shot, one_shot = k_shot_run(study), k_shot_run(study)  # seed 1: one split
    RevisionJudgeRun.objects.filter(pk=one_shot.pk).update(shots=1)
    one_shot.refresh_from_db()
    test = str(turn["Add an example of results."])
    assert examples_pick(ten_shot)[test] == [
        turn["Give results from all papers."],
        turn["Shorten the answer."],
    ]
    assert examples_pick(one_shot)[test] == [turn["Give results from all papers."]]
    assert len(built) == 1  # the second run's index was the first's

    Turn.objects.filter(pk=turn["Shorten the answer."]).update(
        instruction="Add an example of results from all papers."
    )
    assert examples_pick(ten_shot)[test][0] == turn["Shorten the answer."]  # now the nearest
    assert len(built) == 2
