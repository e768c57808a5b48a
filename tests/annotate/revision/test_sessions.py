import json
from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.engine.models import EngineCall
from annotate.engine.services import endpoint_create
from annotate.errors import ConflictError, NotFoundError, NoWorkError, SubmissionError
from annotate.revision import llm
from annotate.revision.models import CallStatus, RevisionSession, SessionStatus, StudySystem
from annotate.revision.services.imports import sessions_import, study_upload
from annotate.revision.services.sessions import (
    call_retry,
    session_assign,
    session_finish,
    stale_calls_fail,
    turn_rate,
    turn_start,
)
from tests.annotate.revision.conftest import QUESTIONS, instruct
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def annotator(db):
    return UserFactory(username="ann-a", kind="expert")


def start(study, user, capture):
    with capture(execute=True):
        return session_assign(study=study, user=user, now=timezone.now())


def test_initial_answer_is_generated_from_the_top_passages(
    study, annotator, django_capture_on_commit_callbacks
):
    session = start(study, annotator, django_capture_on_commit_callbacks)
    session.refresh_from_db()
    assert session.initial_status == CallStatus.DONE
    assert session.initial_answer.startswith("Answer to: How do retrieval-augmented")
    # Four passages, at most five retrieved; the passage on citations ranks first.
    assert len(session.initial_passages) == 4


def test_a_turn_revises_and_the_history_follows_ratings_and_edits(
    study, annotator, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    session = start(study, annotator, capture)
    session.refresh_from_db()
    a0 = session.initial_answer
    now = timezone.now()
    with capture(execute=True):
        turn = turn_start(
            session_id=session.pk,
            user=annotator,
            instruction="Add citations.",
            instruction_type="information-seeking",
            now=now,
        )
    turn.refresh_from_db()
    assert turn.call_status == CallStatus.DONE and turn.previous_answer == a0
    assert turn.summary.startswith("Relevant to 'Add citations.'") and len(turn.passages) == 4
    assert turn.answer == f"{a0}\nRevised for: Add citations."
    turn_rate(
        session_id=session.pk,
        user=annotator,
        rating="bad",
        comment="no",
        now=now + timedelta(seconds=30),
    )
    turn.refresh_from_db()
    assert turn.seconds == 30
    with capture(execute=True):
        second = turn_start(
            session_id=session.pk,
            user=annotator,
            instruction="Shorter.",
            instruction_type="stylistic",
            now=now,
        )
    second.refresh_from_db()
    # A bad answer that was not edited leaves the history: a0 is revised again.
    assert second.previous_answer == a0 and second.passages == [] and second.summary == ""
    turn_rate(
        session_id=session.pk,
        user=annotator,
        rating="neutral",
        comment="meh",
        edited_answer="My own edit.",
        now=now,
    )
    with capture(execute=True):
        third = turn_start(
            session_id=session.pk,
            user=annotator,
            instruction="Polish.",
            instruction_type="stylistic",
            now=now,
        )
    third.refresh_from_db()
    assert third.previous_answer == "My own edit."
    assert third.answer == "My own edit.\nRevised for: Polish."


def test_rating_rules(study, annotator, django_capture_on_commit_callbacks):
    session = start(study, annotator, django_capture_on_commit_callbacks)
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        turn_start(
            session_id=session.pk,
            user=annotator,
            instruction="More.",
            instruction_type="stylistic",
            now=now,
        )
    with pytest.raises(ConflictError):
        turn_start(
            session_id=session.pk,
            user=annotator,
            instruction="Again.",
            instruction_type="stylistic",
            now=now,
        )
    with pytest.raises(SubmissionError, match="comment"):
        turn_rate(session_id=session.pk, user=annotator, rating="good", comment=" ", now=now)
    with pytest.raises(SubmissionError, match="neutral or bad"):
        turn_rate(
            session_id=session.pk,
            user=annotator,
            rating="good",
            comment="ok",
            edited_answer="edit",
            now=now,
        )
    with pytest.raises(SubmissionError):
        turn_rate(session_id=session.pk, user=annotator, rating="great", comment="ok", now=now)
    with pytest.raises(SubmissionError, match="type"):
        turn_start(
            session_id=session.pk, user=annotator, instruction="x", instruction_type="", now=now
        )


def test_session_ends_at_ten_turns_or_when_satisfied(
    study, annotator, django_capture_on_commit_callbacks
):
    session = start(study, annotator, django_capture_on_commit_callbacks)
    now = timezone.now()
    for n in range(10):
        with django_capture_on_commit_callbacks(execute=True):
            turn_start(
                session_id=session.pk,
                user=annotator,
                instruction=f"Step {n}.",
                instruction_type="stylistic",
                now=now,
            )
        turn_rate(session_id=session.pk, user=annotator, rating="good", comment="ok", now=now)
    session.refresh_from_db()
    assert session.status == SessionStatus.FINISHED and not session.satisfied
    with pytest.raises(ConflictError):
        turn_start(
            session_id=session.pk,
            user=annotator,
            instruction="11",
            instruction_type="stylistic",
            now=now,
        )
    other = UserFactory(username="ann-b", kind="expert")
    second = start(study, other, django_capture_on_commit_callbacks)
    assert session_finish(session_id=second.pk, user=other, now=now).satisfied


def test_assignment_follows_section_3_2(study, django_capture_on_commit_callbacks):
    users = [UserFactory(username=f"u{i}") for i in range(5)]
    now = timezone.now()
    pairs = []
    for _round in range(2):
        for user in users:
            try:
                with django_capture_on_commit_callbacks(execute=True):
                    session = session_assign(study=study, user=user, now=now)
            except NoWorkError:
                continue
            pairs.append((session.question_id, session.system_id, user.pk))
            session_finish(session_id=session.pk, user=user, now=now)
    # 2 questions x 2 systems = 4 sessions, each pair once, no annotator sees a question twice.
    assert len(pairs) == 4
    assert len({(q, s) for q, s, _ in pairs}) == 4
    assert len({(q, u) for q, _, u in pairs}) == 4


def test_imported_sessions_add_no_work_for_annotators(
    study, tmp_path, django_capture_on_commit_callbacks
):
    """Published sessions imported into a study brought their question (no papers) and their
    systems (no model: the fake one answered under the name "gpt-4", and those sessions were
    counted in gpt-4's row with the imported ones) into the annotators' assignment."""
    line = {
        "original_question": "A question with no papers here?",
        "model_name": "gpt-4",
        "initial_answer": "a0",
        "interaction": [],
    }
    path = tmp_path / "kiwi.jsonl"
    path.write_text(json.dumps(line) + "\n")
    sessions_import(path=str(path), study_name=study.name)
    users = [UserFactory(username=f"u{i}") for i in range(4)]
    now = timezone.now()
    given = []
    for user in users:
        for _ in range(3):
            try:
                with django_capture_on_commit_callbacks(execute=True):
                    session = session_assign(study=study, user=user, now=now)
            except NoWorkError:
                break
            given.append((session.question.text, session.system.name))
            session_finish(session_id=session.pk, user=user, now=now)
    # The live study's 2 questions x 2 systems, nothing of the imported line.
    assert len(given) == 4
    assert {system for _, system in given} == {"alpha", "beta"}
    assert "A question with no papers here?" not in {question for question, _ in given}
    # A questions upload naming the system makes it live (its position is kept).
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps(QUESTIONS[0]) + "\n")
    study_upload(path=str(questions), study_name=study.name, systems=["gpt-4", "alpha"])
    systems = study.systems.order_by("position", "id").values_list("name", "live")
    assert list(systems) == [("alpha", True), ("beta", True), ("gpt-4", True)]
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=UserFactory(username="late"), now=now)
    assert session.system.name == "gpt-4"


def test_an_annotator_resumes_their_session_and_never_sees_anothers(
    study, annotator, django_capture_on_commit_callbacks
):
    session = start(study, annotator, django_capture_on_commit_callbacks)
    assert start(study, annotator, django_capture_on_commit_callbacks).pk == session.pk
    with pytest.raises(NotFoundError):
        turn_start(
            session_id=session.pk,
            user=UserFactory(username="x"),
            instruction="hi",
            instruction_type="stylistic",
            now=timezone.now(),
        )


def test_a_failed_call_is_a_failure_with_retry_never_an_answer(
    study, annotator, django_capture_on_commit_callbacks, monkeypatch
):
    def broken(**kwargs):
        raise llm.ModelCallError("endpoint down")

    monkeypatch.setattr(llm, "chat", broken)
    session = start(study, annotator, django_capture_on_commit_callbacks)
    session.refresh_from_db()
    assert session.initial_status == CallStatus.FAILED and session.initial_answer == ""
    assert "endpoint down" in session.initial_error
    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        call_retry(session_id=session.pk, user=annotator, now=timezone.now())
    session.refresh_from_db()
    assert session.initial_status == CallStatus.DONE and session.initial_answer


def test_a_call_pending_too_long_becomes_failed(
    study, annotator, django_capture_on_commit_callbacks
):
    session = session_assign(study=study, user=annotator, now=timezone.now())  # never run
    stale_calls_fail(session=session, now=timezone.now() + timedelta(minutes=10))
    session = RevisionSession.objects.get(pk=session.pk)
    assert session.initial_status == CallStatus.FAILED


def test_with_a_broker_the_call_goes_to_celery(
    study, annotator, settings, django_capture_on_commit_callbacks
):
    # CELERY_TASK_ALWAYS_EAGER (test settings) runs the sent task in-process.
    settings.REVISION_GENERATION = "celery"
    session = start(study, annotator, django_capture_on_commit_callbacks)
    session.refresh_from_db()
    assert session.initial_status == CallStatus.DONE and session.initial_answer


def test_a_pair_taken_meanwhile_moves_the_annotator_to_the_next_free_one(
    study, annotator, django_capture_on_commit_callbacks, monkeypatch
):
    from annotate.revision.services import sessions

    first = start(study, UserFactory(username="ann-first"), django_capture_on_commit_callbacks)
    found = sessions._free_pair
    calls = []

    def stale_then_fresh(**kwargs):
        # The first look still sees the pair `first` took (read before it committed).
        calls.append(1)
        return (first.question_id, first.system_id) if len(calls) == 1 else found(**kwargs)

    monkeypatch.setattr(sessions, "_free_pair", stale_then_fresh)
    session = start(study, annotator, django_capture_on_commit_callbacks)
    assert len(calls) == 2
    # The same question's next system: the rule of §3.2 (first question, first free system).
    assert (session.question_id, session.system_id) != (first.question_id, first.system_id)
    assert session.question_id == first.question_id
    assert RevisionSession.objects.filter(annotator=annotator).count() == 1


def test_starting_a_session_runs_a_fixed_number_of_queries(
    study, django_capture_on_commit_callbacks, django_assert_num_queries
):
    # Earlier annotators took every pair but the last: the query count does not grow with them.
    for index in range(3):
        start(study, UserFactory(username=f"early-{index}"), django_capture_on_commit_callbacks)
    late = UserFactory(username="late")
    # the active session, the account's block, the free pair, savepoint, insert, release (the
    # atomic block is the test's savepoint pair)
    with django_assert_num_queries(8):
        session = session_assign(study=study, user=late, now=timezone.now())
    assert session.annotator == late


def test_exports_name_who_did_a_session_and_keep_it_through_import(
    study, annotator, django_capture_on_commit_callbacks, tmp_path
):
    import csv
    import io
    import json

    from annotate.revision.services.exports import sessions_export_csv, sessions_export_jsonl
    from annotate.revision.services.imports import sessions_import

    session = start(study, annotator, django_capture_on_commit_callbacks)
    now = timezone.now()
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorter.")
    turn_rate(session_id=session.pk, user=annotator, rating="good", comment="fine", now=now)
    session_finish(session_id=session.pk, user=annotator, now=now)
    lines, table = io.StringIO(), io.StringIO()
    sessions_export_jsonl(study=study, output=lines)
    sessions_export_csv(study=study, output=table)
    assert json.loads(lines.getvalue())["annotator"] == "ann-a"
    assert [row["annotator"] for row in csv.DictReader(io.StringIO(table.getvalue()))] == ["ann-a"]
    # Imported elsewhere, the name is kept as the file's own field and comes back on export.
    path = tmp_path / "done.jsonl"
    path.write_text(lines.getvalue())
    sessions_import(path=str(path), study_name="copy")
    again, table = io.StringIO(), io.StringIO()
    copy = RevisionSession.objects.get(study__name="copy").study
    sessions_export_jsonl(study=copy, output=again)
    sessions_export_csv(study=copy, output=table)
    assert again.getvalue() == lines.getvalue()
    assert [row["annotator"] for row in csv.DictReader(io.StringIO(table.getvalue()))] == ["ann-a"]


def test_the_export_imported_into_its_own_study_leaves_a_session_done_in_the_app_alone(
    study, annotator, django_capture_on_commit_callbacks, tmp_path
):
    """A session done in the app has no source key, so its exported line imported back into
    the study came in as a second session: Table 2 counted the annotator's work twice."""
    import io

    from annotate.revision.services.exports import sessions_export_jsonl

    session = start(study, annotator, django_capture_on_commit_callbacks)
    now = timezone.now()
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorter.")
    turn_rate(session_id=session.pk, user=annotator, rating="bad", comment="no", now=now)
    session_finish(session_id=session.pk, user=annotator, now=now)
    lines = io.StringIO()
    sessions_export_jsonl(study=study, output=lines)
    path = tmp_path / "done.jsonl"
    path.write_text(lines.getvalue())

    summary = sessions_import(path=str(path), study_name=study.name)

    assert (summary.created, summary.unchanged) == (0, 1)
    assert RevisionSession.objects.filter(study=study).count() == 1


def test_a_system_on_an_offline_endpoint_revises_like_the_fake_model(
    study, annotator, django_capture_on_commit_callbacks
):
    """An endpoint without an address is the engine's offline fake: it read KIWI's initial
    prompt ("Question: ...") as a judge's question and answered YES or NO, and revised with
    a few words about the prompt that kept nothing of the previous answer."""
    capture = django_capture_on_commit_callbacks
    endpoint = endpoint_create(name="offline", model="fake", base_url="")
    StudySystem.objects.filter(study=study).update(endpoint_name="offline")
    session = start(study, annotator, capture)
    session.refresh_from_db()
    a0 = session.initial_answer
    assert a0 == (f"Answer to: {session.question.text} The documents discuss this [0]."), (
        a0
    )  # as a system with no endpoint answers
    seeking = instruct(capture, session, annotator, "Add citations.", "information-seeking")
    seeking.refresh_from_db()
    assert seeking.call_status == CallStatus.DONE
    assert seeking.summary == "Relevant to 'Add citations.': the passages add one finding [1]."
    assert seeking.answer == f"{a0}\nRevised for: Add citations."
    turn_rate(
        session_id=session.pk, user=annotator, rating="good", comment="ok", now=timezone.now()
    )
    stylistic = instruct(capture, session, annotator, "Shorter.")
    stylistic.refresh_from_db()
    assert stylistic.answer == f"{a0}\nRevised for: Add citations.\nRevised for: Shorter."
    # Through the engine all the same: each call stored against the endpoint.
    purposes = list(EngineCall.objects.filter(endpoint=endpoint).values_list("purpose", flat=True))
    assert sorted(purposes) == sorted(
        ["revision-initial", "revision-summary", "revision-answer", "revision-answer"]
    )


def test_a_rating_word_is_taken_in_any_case(study, annotator, django_capture_on_commit_callbacks):
    """The imports take "GOOD" and " Bad "; the session's rating refused "Good" with a 400."""
    session = start(study, annotator, django_capture_on_commit_callbacks)
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")
    turn = turn_rate(
        session_id=session.pk, user=annotator, rating=" Good ", comment="ok", now=timezone.now()
    )
    turn.refresh_from_db()
    assert turn.rating == "good"


def test_a_session_ended_satisfied_keeps_it_through_export_and_import(
    study, annotator, django_capture_on_commit_callbacks, tmp_path
):
    """The JSON Lines export had no word of it: imported back elsewhere, a session the
    annotator ended satisfied came in as ended at the turn limit (satisfied=False)."""
    import io
    import json

    from annotate.errors import ImportFileError
    from annotate.revision.services.exports import sessions_export_jsonl

    session = start(study, annotator, django_capture_on_commit_callbacks)
    now = timezone.now()
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorter.")
    turn_rate(session_id=session.pk, user=annotator, rating="good", comment="fine", now=now)
    session_finish(session_id=session.pk, user=annotator, now=now)
    lines = io.StringIO()
    sessions_export_jsonl(study=study, output=lines)
    record = json.loads(lines.getvalue())
    assert record["satisfied"] is True
    assert {"original_question", "model_name", "initial_answer", "interaction"} <= set(record)
    path = tmp_path / "done.jsonl"
    path.write_text(lines.getvalue())
    sessions_import(path=str(path), study_name="copy")
    assert RevisionSession.objects.get(study__name="copy").satisfied
    # Imported into its own study, it is the same session, not a second one.
    assert sessions_import(path=str(path), study_name=study.name).created == 0
    path.write_text(json.dumps({**record, "satisfied": "yes"}) + "\n")
    with pytest.raises(ImportFileError) as refused:
        sessions_import(path=str(path), study_name="other")
    assert (refused.value.line, refused.value.field) == (1, "satisfied")
