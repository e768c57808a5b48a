import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.engine.services.endpoints import endpoint_create
from annotate.revision.models import CallStatus, RevisionSession, Study, StudySystem, Turn
from annotate.revision.services.imports import study_upload
from annotate.revision.services.sessions import (
    STALE_AFTER,
    call_retry,
    session_assign,
    session_reopen,
    stale_calls_fail,
    turn_rate,
    turn_start,
)
from annotate.roles import ANNOTATOR, RESEARCHER
from tests.annotate.revision.conftest import QUESTIONS, instruct
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def annotator(db):
    return UserFactory(username="page-annotator", roles=[ANNOTATOR])


def test_an_annotator_does_a_turn_through_the_pages(
    client, study, annotator, django_capture_on_commit_callbacks
):
    client.force_login(annotator)
    assert client.get(reverse("revision:home")).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("revision:start", args=[study.pk]))
    session = RevisionSession.objects.get(annotator=annotator)
    assert response.url == reverse("revision:session", args=[session.pk])
    page = client.get(response.url).content.decode()
    assert "Answer to: How do retrieval-augmented" in page
    assert "Paper Zero" in page and "alpha" not in page and "beta" not in page
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("revision:turn-new", args=[session.pk]),
            {"instruction": "Add <b>citations</b>.", "instruction_type": "information-seeking"},
        )
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert "Revised for: Add &lt;b&gt;citations&lt;/b&gt;." in page  # model text is escaped
    assert 'id="rate-form"' in page
    response = client.post(
        reverse("revision:turn-rate", args=[session.pk]), {"rating": "good", "comment": ""}
    )
    assert response.status_code == 400 and b"comment" in response.content
    # The error sits in the form, beside what is wrong, not above the answer.
    form = response.content.decode().split('id="rate-form"')[1].split("</form>")[0]
    assert 'id="form-error"' in form
    client.post(
        reverse("revision:turn-rate", args=[session.pk]), {"rating": "good", "comment": "ok"}
    )
    assert Turn.objects.get().rating == "good"
    untyped = client.post(reverse("revision:turn-new", args=[session.pk]), {"instruction": "More."})
    assert untyped.status_code == 400
    form = untyped.content.decode().split('id="turn-form"')[1].split("</form>")[0]
    assert 'id="form-error"' in form and "More." in form  # what was typed is kept
    client.post(reverse("revision:finish", args=[session.pk]))
    session.refresh_from_db()
    assert session.status == "finished" and session.satisfied
    finished = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert "This session is finished" in finished and "Keyboard shortcuts" not in finished


def test_a_finished_session_offers_the_next_only_while_a_question_is_left(
    client, study, annotator, django_capture_on_commit_callbacks
):
    client.force_login(annotator)
    start = reverse("revision:start", args=[study.pk])
    for left in (True, False):  # the study has two questions
        with django_capture_on_commit_callbacks(execute=True):
            session_id = RevisionSession.objects.get(
                pk=int(client.post(start).url.strip("/").split("/")[-1])
            ).pk
        client.post(reverse("revision:finish", args=[session_id]))
        page = client.get(reverse("revision:session", args=[session_id])).content.decode()
        assert "This session is finished" in page
        assert (f'action="{start}"' in page) is left
        assert ("No question of this study is left for you" in page) is not left
    assert f'href="{reverse("revision:home")}"' in page


def test_pending_answer_is_polled_and_failure_shows_retry(client, study, annotator):
    client.force_login(annotator)
    session = session_assign(study=study, user=annotator, now=timezone.now())  # not run yet
    state = reverse("revision:session-state", args=[session.pk])
    assert client.get(state).json() == {
        "waiting": True,
        "failed": False,
        "partial": "",
        "answer": None,
        "passages": None,
    }
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert "The model is writing" in page
    # The answer's box waits empty and hidden, and so does the form that follows it.
    assert (
        '<pre class="text answer" id="answer" aria-labelledby="answer-title" hidden></pre>' in page
    )
    assert '<div id="next-step" hidden>' in page and 'id="turn-form"' in page
    RevisionSession.objects.filter(pk=session.pk).update(
        initial_status=CallStatus.FAILED, initial_error="endpoint down"
    )
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert 'id="retry"' in page and 'id="answer"' not in page
    assert "The model did not answer. Retry, or give up the session." in page
    assert "endpoint down" not in page  # the error is the researchers' (test_a_failed_call_...)


def test_another_annotator_gets_404(client, study, annotator):
    session = session_assign(study=study, user=annotator, now=timezone.now())
    other = UserFactory(username="other", roles=[ANNOTATOR])
    client.force_login(other)
    assert client.get(reverse("revision:session", args=[session.pk])).status_code == 404
    assert client.get(reverse("revision:session-state", args=[session.pk])).status_code == 404
    response = client.post(
        reverse("revision:turn-new", args=[session.pk]),
        {"instruction": "x", "instruction_type": "stylistic"},
    )
    assert response.status_code == 404


def test_ten_turn_session_page_runs_a_fixed_number_of_queries(
    client, study, annotator, django_capture_on_commit_callbacks, django_assert_num_queries
):
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=now)
    for n in range(10):
        kind = "information-seeking" if n % 2 else "stylistic"
        with django_capture_on_commit_callbacks(execute=True):
            turn_start(
                session_id=session.pk,
                user=annotator,
                instruction=f"Turn {n}.",
                instruction_type=kind,
                now=now,
            )
        turn_rate(session_id=session.pk, user=annotator, rating="neutral", comment="c", now=now)
    client.force_login(annotator)
    url = reverse("revision:session", args=[session.pk])
    client.get(url)
    # session, user, the session with its study, question and system, the stale-call update,
    # the session's call fields again, the document titles, the turns, the last passages, the
    # navigation's roles, (the tenth turn ended it) whether a question is left for the next,
    # and (one is) whether the account is blocked, which would refuse it
    with django_assert_num_queries(11):
        response = client.get(url)
    assert response.content.decode().count('class="turn-done"') == 10
    # Which study the session belongs to, read with the session (no query of its own).
    assert f"<title>Revision session · {study.name}" in response.content.decode()
    assert (
        f'id="study-name">Study {study.name} · <a href="/revision/">' in response.content.decode()
    )


def test_a_system_refused_on_the_upload_page_is_named_by_its_field_there(client, researcher):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(researcher)
    line = b'{"question": "Q?", "documents": [{"title": "T", "text": "Some text."}]}\n'
    response = client.post(
        reverse("revision:upload"),
        {"study": "web", "kind": "questions", "systems": "a=nope",
         "file": SimpleUploadedFile("q.jsonl", line)},
    )  # fmt: skip
    assert response.status_code == 400
    error = response.context["error"]
    assert error.startswith("Systems: 'a=nope': no engine endpoint named 'nope'")
    assert "--system" not in error and error.endswith("Nothing was written.")
    assert not Study.objects.filter(name="web").exists()


def test_systems_given_with_a_sessions_file_are_refused_not_dropped(client, researcher):
    """Systems typed beside a KIWI sessions file were dropped unread: the import went through
    and the researcher believed the study had them."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(researcher)
    session = {
        "original_question": "Q?", "model_name": "m1", "initial_answer": "A.",
        "interaction": [{"instruction": "Shorter.", "answer_1": "A", "answer_2": "",
                         "rating": "good", "comment": "ok"}],
    }  # fmt: skip
    response = client.post(
        reverse("revision:upload"),
        {"study": "web-sessions", "kind": "sessions", "systems": "gpt-4",
         "file": SimpleUploadedFile("s.jsonl", json.dumps(session).encode() + b"\n")},
    )  # fmt: skip
    assert response.status_code == 400
    assert response.context["error"].startswith("Systems: a sessions file names its own systems")
    assert response.context["error"].endswith("Nothing was written.")
    assert not Study.objects.filter(name="web-sessions").exists()


def test_researcher_uploads_a_study_and_a_bad_file_names_the_line(client, researcher):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotate.revision.models import Study

    client.force_login(researcher)
    # The page shows both formats (it pointed at docs/revision.md, which a browser cannot open).
    form = client.get(reverse("revision:upload")).content.decode()
    assert "docs/revision.md" not in form
    assert '{"question": "What limits long-context models?", "documents": [{"title"' in form
    assert '"answer_2": "", "rating": "good", "comment": "..."}]}' in form
    endpoint_create(name="endpoint-b", model="m")  # the offline fake: free, a researcher's to use
    good = b'{"question": "Q?", "documents": [{"title": "T", "text": "Some text."}]}\n'
    response = client.post(
        reverse("revision:upload"),
        {
            "study": "web",
            "kind": "questions",
            "systems": "a, b=endpoint-b",
            "file": SimpleUploadedFile("q.jsonl", good),
        },
    )
    assert response.status_code == 302
    study = Study.objects.get(name="web")
    assert study.questions.count() == 1 and study.systems.count() == 2
    # Next: the new study's report, with what was imported, in words for one question.
    assert response.url == reverse("revision-reports:report", args=[study.pk])
    assert "Imported 1 question from q.jsonl." in client.get(response.url).content.decode()
    bad = good + b'{"question": "R?", "documents": []}\n'
    response = client.post(
        reverse("revision:upload"),
        {"study": "web2", "kind": "questions", "file": SimpleUploadedFile("bad.jsonl", bad)},
    )
    assert response.status_code == 400
    assert "bad.jsonl, line 2, field &#x27;documents&#x27;" in response.content.decode()
    session = (  # a session file with a rating word not allowed
        b'{"original_question": "Q?", "model_name": "m", "initial_answer": "a", "interaction":'
        b' [{"instruction": "i", "answer_1": "b", "answer_2": "", "rating": "great",'
        b' "comment": "c"}]}\n'
    )
    response = client.post(
        reverse("revision:upload"),
        {"study": "web3", "kind": "sessions", "file": SimpleUploadedFile("s.jsonl", session)},
    )
    text = response.content.decode()
    assert response.status_code == 400 and "(any case). Nothing was written." in text, text
    assert not Study.objects.filter(name="web2").exists()


QUESTION_FILE = b'{"question": "Q?", "documents": [{"title": "T", "text": "Some text."}]}\n'


def _upload_questions(client, study: str, systems: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post(
        reverse("revision:upload"),
        {
            "study": study,
            "kind": "questions",
            "systems": systems,
            "file": SimpleUploadedFile("q.jsonl", QUESTION_FILE),
        },
    )


def test_only_an_admin_gives_a_study_system_a_paid_endpoint(client, researcher, admin_user):
    """Every turn of every annotator's session calls the system's endpoint: binding a paid one
    spends money, which only admins may do; an endpoint that does not exist is refused too."""
    endpoint_create(name="paid", model="m", base_url="https://llm.example.org/v1")
    client.force_login(researcher)
    response = _upload_questions(client, "mine", "a=paid")
    text = response.content.decode()
    assert response.status_code == 403, text
    assert "endpoint &#x27;paid&#x27; calls a paid API: only an admin" in text
    assert "Nothing was written." in text and not Study.objects.filter(name="mine").exists()
    response = _upload_questions(client, "mine", "a=no-such-endpoint")
    assert response.status_code == 400  # refused for everyone, before any permission question
    assert "no engine endpoint named &#x27;no-such-endpoint&#x27;" in response.content.decode()
    # An admin's study: a researcher re-uploading to it cannot move its system to a paid one.
    client.force_login(admin_user)
    assert _upload_questions(client, "admins", "a").status_code == 302
    client.force_login(researcher)
    assert _upload_questions(client, "admins", "a=paid").status_code == 403
    assert Study.objects.get(name="admins").systems.get().endpoint_name == ""
    client.force_login(admin_user)
    assert _upload_questions(client, "admins", "a=paid").status_code == 302
    assert Study.objects.get(name="admins").systems.get().endpoint_name == "paid"


def test_uploads_are_limited_per_user(client, researcher, worker_rates):
    """Past the upload rate the page answers 429 with Retry-After and reads nothing; another
    user, and the same user's other pages, are not held up."""
    worker_rates(uploads="2/hour")
    client.force_login(researcher)
    assert [_upload_questions(client, f"s{i}", "").status_code for i in (1, 2)] == [302, 302]
    refused = _upload_questions(client, "s3", "")
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert "Too many requests" in refused.content.decode()
    assert not Study.objects.filter(name="s3").exists()
    assert client.get(reverse("revision:upload")).status_code == 200
    client.force_login(UserFactory(username="second-researcher", roles=[RESEARCHER]))
    assert _upload_questions(client, "s3", "").status_code == 302


def test_annotators_cannot_upload(client, annotator):
    client.force_login(annotator)
    page = client.get(reverse("revision:upload"))
    # A role error: the 403 page in the site's layout, saying why.
    assert page.status_code == 403
    assert "Only researchers upload studies." in page.content.decode()


def test_session_page_reads_what_the_orm_reads(
    study, annotator, django_capture_on_commit_callbacks
):
    """The page's compiled reads (annotate.compiled) give the rows the ORM querysets gave."""
    from annotate.revision.models import Document, Passage
    from annotate.revision.selectors import session_page_get, session_state

    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=now)
    for n in range(3):
        kind = "information-seeking" if n % 2 else "stylistic"
        with django_capture_on_commit_callbacks(execute=True):
            turn_start(
                session_id=session.pk,
                user=annotator,
                instruction=f"<b>{n}</b>",
                instruction_type=kind,
                now=now,
            )
        turn_rate(session_id=session.pk, user=annotator, rating="good", comment="c", now=now)
    page = session_page_get(session_id=session.pk, user=annotator, now=now)
    orm_turns = list(Turn.objects.filter(session_id=session.pk).order_by("position"))
    fields = [f.attname for f in Turn._meta.concrete_fields]
    assert [[getattr(t, f) for f in fields] for t in page.turns] == [
        [getattr(t, f) for f in fields] for t in orm_turns
    ]
    assert page.titles == list(
        Document.objects.filter(question_id=session.question_id)
        .order_by("position")
        .values_list("title", flat=True)
    )
    ids = orm_turns[1].passages
    assert ids
    by_id = Passage.objects.select_related("document").in_bulk(ids)
    assert [(p.pk, p.text, p.document.title) for p in page.passages] == [
        (by_id[i].pk, by_id[i].text, by_id[i].document.title) for i in ids if i in by_id
    ]
    state = session_state(session_id=session.pk, user=annotator, now=now)
    assert state["answer"] == orm_turns[-1].final_answer


def test_an_answer_sent_back_unchanged_with_browser_line_breaks_is_not_an_edit(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """Browsers send a textarea's line breaks as CRLF: the pre-filled model answer sent back as
    it was shown must not count as the annotator's edit, and, rated bad, leaves the history."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("revision:start", args=[study.pk]))
    session = RevisionSession.objects.get(annotator=annotator)
    session.refresh_from_db()
    a0 = session.initial_answer
    turn_new = reverse("revision:turn-new", args=[session.pk])
    rate = reverse("revision:turn-rate", args=[session.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(turn_new, {"instruction": "Shorter.", "instruction_type": "stylistic"})
    first = Turn.objects.get(session=session)
    assert "\n" in first.answer  # the model's text has line breaks: the case at hand
    shown = first.answer.replace("\n", "\r\n")
    response = client.post(
        rate, {"rating": "bad", "comment": "too long\r\nstill", "edited_answer": shown}
    )
    assert response.status_code == 302
    first.refresh_from_db()
    assert first.edited_answer == "" and first.comment == "too long\nstill"
    with django_capture_on_commit_callbacks(execute=True):
        client.post(turn_new, {"instruction": "Again.\r\nPlease.", "instruction_type": "stylistic"})
    second = Turn.objects.get(session=session, position=2)
    assert second.previous_answer == a0  # the unedited bad answer was dropped
    assert second.instruction == "Again.\nPlease."
    edit = "My own\r\nedit."
    client.post(rate, {"rating": "neutral", "comment": "ok", "edited_answer": edit})
    second.refresh_from_db()
    assert second.edited_answer == "My own\nedit."  # a real edit, kept with the model's breaks
    page = client.get(reverse("revision:home")).content.decode()
    assert "<td>live</td><td>1</td>" in page  # one session, however many documents


def test_the_studies_list_counts_each_session_once(client, study, annotator):
    client.force_login(annotator)
    for _ in range(2):  # two sessions, on a study whose first question has two documents
        session = session_assign(study=study, user=annotator, now=timezone.now())
        RevisionSession.objects.filter(pk=session.pk).update(status="finished")
    page = client.get(reverse("revision:home")).content.decode()
    assert "<td>live</td><td>2</td>" in page
    # Both questions done: no Start button that could only say so after a click.
    assert "No question left for you" in page and "Start a session" not in page


def test_a_study_without_a_system_says_so_and_is_not_offered(client, study, annotator, tmp_path):
    """Questions uploaded with no system: the upload said only "Imported 2 questions", and
    annotators were offered the study with "No question left for you"."""
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(QUESTIONS[0]) + "\n")
    summary = study_upload(path=str(path), study_name="no systems yet", systems=[])
    assert summary.message.endswith(
        "The study has no system yet, so annotators get no session: name one "
        "(Systems on the upload page, --system with import_study)."
    )
    assert "no system" not in study_upload(path=str(path), study_name="live", systems=[]).message
    client.force_login(annotator)
    page = client.get(reverse("revision:home")).content.decode()
    assert "<td>live</td>" in page and "no systems yet" not in page


def test_the_migration_clears_edits_that_were_the_answer_sent_back_with_crlf(
    study, annotator, django_capture_on_commit_callbacks
):
    """Cleared where the history does not change (neutral, or bad as the last turn); kept where
    a session went on from a bad answer; imported sessions untouched."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module(
        "annotate.revision.migrations.0004_unedited_answers_with_crlf"
    )
    with django_capture_on_commit_callbacks(execute=True):
        first = session_assign(study=study, user=annotator, now=timezone.now())
        RevisionSession.objects.filter(pk=first.pk).update(status="finished")
        second = session_assign(study=study, user=annotator, now=timezone.now())
    assert first.pk != second.pk
    imported = RevisionSession.objects.create(
        study=study, question=first.question, system=first.system, initial_answer="a0",
        created_at=timezone.now(),
    )  # fmt: skip
    shown = "Line one\r\nLine two\r\n"  # the model's "Line one\nLine two" as a browser sends it
    turns = {}
    for name, owner, position, rating, previous, edit in [
        ("neutral", first, 1, "neutral", "a0", shown),
        ("edited", first, 2, "bad", shown, "Mine\r\nnow"),
        ("bad-last", first, 3, "bad", "Mine\r\nnow", shown),
        ("bad-went-on", second, 1, "bad", "a0", shown),
        ("after-bad", second, 2, "good", shown, ""),
        ("imported", imported, 1, "bad", "a0", shown),
    ]:
        turns[name] = Turn.objects.create(
            session=owner, position=position, instruction="Do\r\nit",
            instruction_type="stylistic", previous_answer=previous, answer="Line one\nLine two",
            call_status=CallStatus.DONE, rating=rating, comment="why\r\nnot", edited_answer=edit,
        )  # fmt: skip
    migration.forwards(apps, None)
    for turn in turns.values():
        turn.refresh_from_db()
    assert turns["neutral"].edited_answer == "" and turns["neutral"].comment == "why\nnot"
    assert turns["edited"].previous_answer == "Line one\nLine two"  # as the rule now gives it
    assert turns["edited"].edited_answer == "Mine\r\nnow"  # a real edit, as the next turn saw it
    assert turns["edited"].instruction == "Do\nit"
    assert turns["bad-last"].edited_answer == ""
    assert turns["bad-went-on"].edited_answer == shown  # the session went on from it
    assert turns["after-bad"].previous_answer == shown
    assert turns["imported"].edited_answer == shown and turns["imported"].comment == "why\r\nnot"


def test_a_failed_turn_shows_the_instruction_it_was_for(
    client, study, annotator, django_capture_on_commit_callbacks
):
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    turn = turn_start(
        session_id=session.pk,
        user=annotator,
        instruction="Cite the <second> paper.",
        instruction_type="information-seeking",
        now=timezone.now(),
    )  # fmt: skip  (its call is never run here)
    Turn.objects.filter(pk=turn.pk).update(call_status=CallStatus.FAILED, call_error="timeout")
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert 'id="retry"' in page and "The model did not answer." in page
    assert "timeout" not in page  # the call's error is for researchers (admin, log)
    assert "Your instruction (Information-seeking):</strong> Cite the &lt;second&gt; paper." in page


def test_the_rating_form_shows_the_answer_the_turn_revised(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """Rating a turn, the page showed only its revision: whether it "made it worse" could not
    be told without the answer before it (the annotator's own edit, from turn 2 on), which the
    re-rating page shows. The rating form now holds it, folded."""
    capture = django_capture_on_commit_callbacks
    client.force_login(annotator)
    with capture(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    instruct(capture, session, annotator, "Shorter.")
    turn_rate(
        session_id=session.pk, user=annotator, rating="bad", comment="no",
        edited_answer="My <own> edit.", now=timezone.now(),
    )  # fmt: skip
    instruct(capture, session, annotator, "Use a list.")
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    form = page.split('id="rate-form"')[1].split("</form>")[0]
    previous = form.split('<details id="previous-answer">')[1].split("</details>")[0]
    assert "<summary>The answer this turn revised</summary>" in previous
    assert '<pre class="text">My &lt;own&gt; edit.</pre>' in previous


def test_after_a_bad_unedited_revision_the_page_shows_the_answer_the_next_turn_revises(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """Paper §2.2: a bad answer that was not edited leaves the history. The page shows the
    answer the next instruction revises (here a0), not the dropped revision, and says why."""
    capture = django_capture_on_commit_callbacks
    client.force_login(annotator)
    with capture(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    session.refresh_from_db()
    a0 = session.initial_answer
    page_url = reverse("revision:session", args=[session.pk])
    instruct(capture, session, annotator, "Shorter.")
    dropped = f"{a0}\nRevised for: Shorter."
    assert dropped in client.get(page_url).content.decode()  # the revision to rate
    turn_rate(session_id=session.pk, user=annotator, rating="bad", comment="no", now=timezone.now())
    page = client.get(page_url).content.decode()
    answer = page.split('id="answer"')[1].split("</pre>")[0]
    assert answer.endswith(f">{a0}") and "Revised for: Shorter." not in answer
    assert 'id="dropped"' in page and "Answer your next instruction revises" in page
    turn = instruct(capture, session, annotator, "Use a list.")
    turn.refresh_from_db()
    assert turn.previous_answer == a0  # what the page showed is what the model revised
    turn_rate(
        session_id=session.pk, user=annotator, rating="neutral", comment="meh", now=timezone.now()
    )
    page = client.get(page_url).content.decode()
    answer = page.split('id="answer"')[1].split("</pre>")[0]
    assert answer.endswith(f">{a0}\nRevised for: Use a list.") and 'id="dropped"' not in page
    assert "Answer after turn 2" in page


def test_the_keyboard_legend_names_only_the_keys_of_the_step(
    client, study, annotator, django_capture_on_commit_callbacks
):
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    url = reverse("revision:session", args=[session.pk])

    def legend():
        page = client.get(url).content.decode()
        return page.split('aria-label="Keyboard shortcuts">')[1].split("</aside>")[0]

    assert "submit" in legend() and "rate" not in legend()  # writing: no rating to give
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorter.")
    assert "rate" in legend() and "comment" in legend()


def rerating_of(study, annotator):
    """A finished turn of someone else's session, sent to `annotator` to rate again."""
    from annotate.revision.models import Rerating

    owner = UserFactory(username="owner", roles=[ANNOTATOR])
    session = RevisionSession.objects.create(
        study=study,
        question=study.questions.first(),
        system=study.systems.first(),
        annotator=owner,
        status="finished",
        initial_answer="a0",
        created_at=timezone.now(),
    )
    turn = Turn.objects.create(
        session=session, position=1, instruction="Cite a paper.", answer="a1 [0]", rating="good"
    )
    return Rerating.objects.create(turn=turn, annotator=annotator, created_at=timezone.now())


def test_a_refused_rerating_keeps_its_choice_and_a_saved_one_says_so(client, study, annotator):
    rerating = rerating_of(study, annotator)
    client.force_login(annotator)
    home = client.get(reverse("revision:home")).content.decode()
    assert "turn 1: Cite a paper." in home  # which turn, not only the question
    url = reverse("revision:rerating", args=[rerating.pk])
    page = client.get(url).content.decode()
    assert 'aria-label="Keyboard shortcuts"' in page
    refused = client.post(url, {"rating": "bad", "comment": "  "})
    assert refused.status_code == 400
    assert 'value="bad" data-key="3" checked' in refused.content.decode()
    saved = client.post(url, {"rating": "bad", "comment": "No paper cited."}, follow=True)
    assert saved.redirect_chain[-1][0] == reverse("revision:home")
    assert "Rating saved" in saved.content.decode()
    assert "Turns to rate again" not in saved.content.decode()  # nothing left to rate again
    rerated = saved.content.decode().split('id="rerated-turns"')[1]
    assert "Cite a paper." in rerated  # listed as done, opening the read-only page


@pytest.mark.parametrize("ended_by", ["satisfied", "max_turns"])
def test_a_session_ended_after_a_bad_unedited_revision_shows_its_final_answer(
    client, study, annotator, django_capture_on_commit_callbacks, ended_by
):
    """Once no instruction can follow (the annotator is satisfied, or the last turn allowed is
    rated), the dropped revision's answer before it is the session's final answer: the page
    no longer speaks of a next instruction."""
    from annotate.revision.services.sessions import session_finish

    capture = django_capture_on_commit_callbacks
    if ended_by == "max_turns":
        Study.objects.filter(pk=study.pk).update(max_turns=1)
    client.force_login(annotator)
    with capture(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    session.refresh_from_db()
    instruct(capture, session, annotator, "Shorter.")
    turn_rate(session_id=session.pk, user=annotator, rating="bad", comment="no", now=timezone.now())
    if ended_by == "satisfied":
        session_finish(session_id=session.pk, user=annotator, now=timezone.now())

    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()

    assert "This session is finished" in page
    assert "next instruction" not in page
    assert '<h2 id="answer-title">Final answer of the session</h2>' in page
    assert "turn 1's revision bad and did not edit it, so it was dropped" in page
    answer = page.split('id="answer"')[1].split("</pre>")[0]
    assert answer.endswith(f">{session.initial_answer}")


@pytest.mark.parametrize("ended_by", ["satisfied", "max_turns"])
def test_a_finished_session_says_what_ended_it(
    client, study, annotator, django_capture_on_commit_callbacks, ended_by
):
    """A session stopped by the turn limit read "This session is finished", as one the
    annotator ended satisfied did: they could not tell that the limit had ended it."""
    from annotate.revision.services.sessions import session_finish

    capture = django_capture_on_commit_callbacks
    if ended_by == "max_turns":
        Study.objects.filter(pk=study.pk).update(max_turns=1)
    client.force_login(annotator)
    with capture(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    session.refresh_from_db()
    instruct(capture, session, annotator, "Shorter.")
    turn_rate(
        session_id=session.pk, user=annotator, rating="good", comment="ok", now=timezone.now()
    )
    if ended_by == "satisfied":
        session_finish(session_id=session.pk, user=annotator, now=timezone.now())

    page = client.get(reverse("revision:session", args=[session.pk])).text

    limit = "it reached the limit of 1 turn"
    satisfied = "you ended it, satisfied with the answer"
    assert (limit in page) is (ended_by == "max_turns")
    assert (satisfied in page) is (ended_by == "satisfied")


def reratings_of(study, annotator, count, question=None, answer="a1 [0]"):
    """`count` finished turns of someone else's session on `question`, sent to `annotator`."""
    from annotate.revision.models import Rerating

    owner = UserFactory(roles=[ANNOTATOR])
    session = RevisionSession.objects.create(
        study=study, question=question or study.questions.first(), system=study.systems.first(),
        annotator=owner, status="finished", initial_answer="a0", created_at=timezone.now(),
    )  # fmt: skip
    return [
        Rerating.objects.create(
            turn=Turn.objects.create(
                session=session,
                position=n,
                instruction=f"Cite paper {n}.",
                answer=answer,
                previous_answer="a0",
                rating="good",
                instruction_type="information-seeking",
            ),
            annotator=annotator,
            created_at=timezone.now(),
        )  # fmt: skip
        for n in range(1, count + 1)
    ]


def test_a_rerating_shows_the_papers_and_how_far_the_rerater_is(client, study, annotator):
    """The re-rater judged without the papers' titles and did not know how many turns were left;
    a save now goes straight on to the study's next turn. The titles are a plain list: numbered
    0, 1, ... they read as what the answer's "[0]" cites, which is a retrieved passage, not a
    paper (as on the session page)."""
    first, second = reratings_of(study, annotator, 2, answer="<b>a1</b> [0]")
    client.force_login(annotator)
    page = client.get(reverse("revision:rerating", args=[first.pk])).content.decode()
    titles = page.split('<ul class="titles" id="titles">')[1].split("</ul>")[0]
    assert titles == "<li>Paper Zero</li><li>Paper One</li>"
    assert '<span id="rerate-progress">0 of 2 re-rated</span>' in page
    assert "Instruction (information-seeking)" in page
    assert "&lt;b&gt;a1&lt;/b&gt; [0]" in page and "<b>a1</b>" not in page  # model output as text
    saved = client.post(
        reverse("revision:rerating", args=[first.pk]), {"rating": "good", "comment": "Cites 0."}
    )
    assert saved.url == reverse("revision:rerating", args=[second.pk])
    page = client.get(saved.url).content.decode()
    assert "Rating saved: 1 of 2 re-rated." in page
    assert '<span id="rerate-progress">1 of 2 re-rated</span>' in page


def test_the_last_rerating_of_a_study_goes_on_to_those_of_another_study(
    client, study, annotator, tmp_path
):
    """Saving the last re-rating of one study said "2 of 2 re-rated. Thank you!" on the list
    of sessions, while turns sent in another study still waited there: it read as done. It now
    names the study, and goes straight on to the other study's turns; the page names its study."""
    path = tmp_path / "second.jsonl"
    path.write_text(json.dumps(QUESTIONS[0]) + "\n")
    study_upload(path=str(path), study_name="second study", systems=["gamma"])
    second = Study.objects.get(name="second study")
    (theirs,) = reratings_of(second, annotator, 1)
    first, last = reratings_of(study, annotator, 2)
    client.force_login(annotator)
    page = client.get(reverse("revision:rerating", args=[first.pk])).content.decode()
    assert '<p class="tags" id="study-name">Study live · ' in page
    client.post(reverse("revision:rerating", args=[first.pk]), {"rating": "good", "comment": "ok"})
    saved = client.post(
        reverse("revision:rerating", args=[last.pk]), {"rating": "bad", "comment": "no"}
    )
    assert saved.url == reverse("revision:rerating", args=[theirs.pk])
    page = client.get(saved.url).content.decode()
    assert (
        "Rating saved: 2 of 2 re-rated: every turn sent to you in live. Thank you! "
        "Next, the turns sent to you in second study."
    ) in page
    assert '<p class="tags" id="study-name">Study second study · ' in page
    assert '<span id="rerate-progress">0 of 1 re-rated</span>' in page
    saved = client.post(
        reverse("revision:rerating", args=[theirs.pk]), {"rating": "good", "comment": "ok"}
    )
    assert saved.url == reverse("revision:home")
    page = client.get(saved.url).content.decode()
    assert (
        "Rating saved: 1 of 1 re-rated: every turn sent to you in second study. Thank you!" in page
    )


def test_home_names_the_study_of_each_turn_to_rate_again_and_rated_again(
    client, study, annotator, tmp_path
):
    """Turns to rate again in two studies on the same question read alike on /revision/: each
    names its study, as the re-rating page does (and so do the turns rated again)."""
    path = tmp_path / "second.jsonl"
    path.write_text(json.dumps(QUESTIONS[0]) + "\n")
    study_upload(path=str(path), study_name="second study", systems=["gamma"])
    second = Study.objects.get(name="second study")
    (theirs,) = reratings_of(second, annotator, 1, question=second.questions.get())
    (ours, done) = reratings_of(study, annotator, 2)
    done.status, done.rating, done.rated_at = "done", "good", timezone.now()
    done.save()
    client.force_login(annotator)
    home = client.get(reverse("revision:home")).text
    to_rate = home.split('id="to-rerate"')[1].split("</ul>")[0]
    items = re.findall(r"<li>(Study [^<]*)<a href=\"([^\"]+)\"", to_rate)
    assert items == [
        ("Study second study · ", reverse("revision:rerating", args=[theirs.pk])),
        ("Study live · ", reverse("revision:rerating", args=[ours.pk])),
    ]
    rerated = home.split('id="rerated-turns"')[1].split("</ul>")[0]
    assert f'<li>Study live · <a href="{reverse("revision:rerating", args=[done.pk])}"' in rerated


def test_a_rerater_sees_only_their_own_reratings_and_counts(client, study, annotator):
    other = UserFactory(username="other-rerater", roles=[ANNOTATOR])
    (theirs,) = reratings_of(study, other, 1)
    (mine,) = reratings_of(study, annotator, 1, question=study.questions.last())
    client.force_login(annotator)
    assert client.get(reverse("revision:rerating", args=[theirs.pk])).status_code == 404
    refused = client.post(
        reverse("revision:rerating", args=[theirs.pk]), {"rating": "bad", "comment": "x"}
    )
    assert refused.status_code == 404
    page = client.get(reverse("revision:rerating", args=[mine.pk])).content.decode()
    assert '<span id="rerate-progress">0 of 1 re-rated</span>' in page  # not 0 of 2


def test_a_question_without_documents_says_so_on_the_rerating(client, study, annotator):
    (rerating,) = reratings_of(study, annotator, 1)
    rerating.turn.session.question.documents.all().delete()
    client.force_login(annotator)
    page = client.get(reverse("revision:rerating", args=[rerating.pk])).content.decode()
    assert "No paper titles are stored for this question." in page


def test_the_rerating_page_runs_a_fixed_number_of_queries(
    client, study, annotator, django_assert_num_queries
):
    (few,) = reratings_of(study, annotator, 1, question=study.questions.last())  # one paper
    many = reratings_of(study, annotator, 12)  # two papers, twelve turns
    client.force_login(annotator)
    for rerating in (few, many[-1]):
        client.get(reverse("revision:rerating", args=[rerating.pk]))
        # session, user, the re-rating with its turn, session and question, the titles, the
        # progress, the navigation's roles
        with django_assert_num_queries(6):
            response = client.get(reverse("revision:rerating", args=[rerating.pk]))
        assert "of 13 re-rated" in response.content.decode()


def test_a_page_out_of_date_shows_the_session_as_it_is_and_what_was_not_saved(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """Two tabs: a step taken in one made the other's form a dead end ("Cannot do that", a
    link to the start page) that dropped the instruction typed there."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")  # tab A
    session_url = reverse("revision:session", args=[session.pk])
    response = client.post(  # tab B, still showing the instruction form
        reverse("revision:turn-new", args=[session.pk]),
        {"instruction": "Add the year.", "instruction_type": "stylistic"},
        follow=True,
    )
    assert response.redirect_chain == [(session_url, 302)]
    page = response.content.decode()
    assert "Your instruction was not sent (&quot;Add the year.&quot;)" in page
    assert "rate the last revision before the next instruction" in page
    assert 'id="rate-form"' in page  # the step the session is at
    rate = reverse("revision:turn-rate", args=[session.pk])
    client.post(rate, {"rating": "good", "comment": "ok"})
    again = client.post(rate, {"rating": "bad", "comment": "no"}, follow=True)
    assert again.redirect_chain == [(session_url, 302)]
    assert "Your rating was not saved: this revision is already rated" in again.content.decode()
    assert Turn.objects.get().rating == "good"


def test_a_failed_turn_is_not_headed_as_an_answer(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """The heading said "Answer after turn 1" above the error and Retry, with no answer."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    turn = instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")
    Turn.objects.filter(pk=turn.pk).update(
        call_status=CallStatus.FAILED, call_error="endpoint down", answer=""
    )
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert 'id="answer-title">Turn 1: no answer yet</h2>' in page
    assert "Answer after turn 1" not in page and 'id="retry"' in page


def test_an_annotator_withdraws_an_instruction_the_model_keeps_failing(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """With the endpoint down, a failed turn offered only Retry and "I am satisfied" refused
    while it was unrated: the session stayed in progress for ever and held the annotator's
    other sessions back. Withdrawing puts the instruction back in the box, once; the session
    goes on (or ends) from the answer before it, and a rated turn cannot be withdrawn."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    turn = instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten <it>.")
    Turn.objects.filter(pk=turn.pk).update(
        call_status=CallStatus.FAILED, call_error="endpoint down", answer=""
    )
    session_url = reverse("revision:session", args=[session.pk])
    withdraw = reverse("revision:withdraw", args=[session.pk])
    page = client.get(session_url).content.decode()
    assert f'action="{withdraw}"' in page and 'id="withdraw"' in page
    assert client.post(reverse("revision:finish", args=[session.pk])).status_code == 302
    assert RevisionSession.objects.get().status == "active"  # refused: the turn is unrated

    back = client.post(withdraw, follow=True)
    assert back.redirect_chain == [(session_url, 302)]
    page = back.content.decode()
    assert not Turn.objects.exists()
    assert "Your instruction was withdrawn" in page
    assert 'data-draft="instruction">Shorten &lt;it&gt;.</textarea>' in page
    assert 'value="stylistic" data-draft="instruction_type" checked' in page
    assert 'id="answer" aria-labelledby="answer-title">' in page and 'id="satisfied"' in page
    again = client.get(session_url).content.decode()  # once: a reload starts a clean box
    assert 'data-draft="instruction"></textarea>' in again
    refused = client.post(withdraw, follow=True).content.decode()
    assert "Nothing was withdrawn: only an instruction whose model call failed" in refused

    # Sent again once the model is back, answered and rated: no longer withdrawable.
    turn = instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")
    client.post(
        reverse("revision:turn-rate", args=[session.pk]), {"rating": "good", "comment": "ok"}
    )
    client.post(withdraw)
    assert Turn.objects.get().rating == "good"
    client.post(reverse("revision:finish", args=[session.pk]))
    assert RevisionSession.objects.get().status == "finished"


def test_someone_elses_failed_instruction_cannot_be_withdrawn(
    client, study, annotator, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    turn = instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")
    Turn.objects.filter(pk=turn.pk).update(call_status=CallStatus.FAILED, call_error="down")
    client.force_login(UserFactory(username="other-annotator", roles=[ANNOTATOR]))
    assert client.post(reverse("revision:withdraw", args=[session.pk])).status_code == 404
    assert Turn.objects.filter(pk=turn.pk).exists()


def test_a_rerating_gives_the_ratings_the_words_the_session_page_gives(client, study, annotator):
    """Re-raters rated against bare "good / neutral / bad" while the session's annotator read
    what each means; Table 5's Human row compares the two."""
    rerating = rerating_of(study, annotator)
    client.force_login(annotator)
    page = client.get(reverse("revision:rerating", args=[rerating.pk])).content.decode()
    for meaning in ("good: followed it", "neutral: partly", "bad: not at all, or made it worse"):
        assert meaning in page


def test_a_rating_sent_without_a_choice_is_refused_by_the_server_too(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """The browser asks for a rating before sending (tests/e2e); a form sent without one all the
    same (a page from before, a script) is refused, its comment and edit shown again, and nothing
    is saved. The same on the re-rating page, below."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorter.")
    refused = client.post(
        reverse("revision:turn-rate", args=[session.pk]),
        {"comment": "Not shorter.", "edited_answer": "My edit."},
    )
    assert refused.status_code == 400
    form = refused.content.decode().split('id="rate-form"')[1].split("</form>")[0]
    assert "rate the revision good, neutral or bad" in form
    assert ">Not shorter.</textarea>" in form and ">My edit.</textarea>" in form
    assert Turn.objects.get().rating == ""


def test_a_rerating_sent_without_a_choice_is_refused_by_the_server_too(client, study, annotator):
    rerating = rerating_of(study, annotator)
    client.force_login(annotator)
    url = reverse("revision:rerating", args=[rerating.pk])
    refused = client.post(url, {"comment": "No paper cited."})
    assert refused.status_code == 400
    assert "rate the revision good, neutral or bad" in refused.content.decode()
    assert ">No paper cited.</textarea>" in refused.content.decode()
    rerating.refresh_from_db()
    assert (rerating.status, rerating.rating) == ("pending", "")


def test_model_calls_from_a_session_are_limited_per_user(
    client, study, annotator, worker_rates, django_capture_on_commit_callbacks
):
    """With the endpoint failing, Retry (or withdraw and send again) could be repeated without
    end, each a model call on the endpoint's shared pacing. Starting a session, an instruction
    and a retry count against the user's rate; over it nothing is sent, the page says when to
    come back (429, Retry-After) and keeps the instruction typed. Continuing a session, and
    withdrawing, call no model and are not held up."""
    clock = worker_rates(model_calls="3/hour")
    client.force_login(annotator)
    start = reverse("revision:start", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(start).status_code == 302  # 1: the initial answer
    session = RevisionSession.objects.get()
    assert client.post(start).url == reverse("revision:session", args=[session.pk])  # continued
    turn_url = reverse("revision:turn-new", args=[session.pk])
    retry = reverse("revision:retry", args=[session.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(turn_url, {"instruction": "Shorten it.", "instruction_type": "stylistic"})
    failed = {"call_status": CallStatus.FAILED, "call_error": "endpoint down", "answer": ""}
    Turn.objects.update(**failed)
    with django_capture_on_commit_callbacks(execute=True) as sent:
        assert client.post(retry).status_code == 302  # 3
    assert len(sent) == 1
    Turn.objects.update(**failed)

    with django_capture_on_commit_callbacks(execute=True) as sent:
        refused = client.post(retry)
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    told = "Too many model calls from your account (at most 3/hour). Please wait 60 min"
    assert told in refused.content.decode()
    assert sent == [] and Turn.objects.get().call_status == CallStatus.FAILED
    assert client.post(reverse("revision:withdraw", args=[session.pk])).status_code == 302
    resent = client.post(
        turn_url, {"instruction": "Shorten <it>.", "instruction_type": "stylistic"}
    )
    assert resent.status_code == 429 and resent["Retry-After"] == "3600"
    form = resent.content.decode().split('id="turn-form"')[1].split("</form>")[0]
    assert 'id="form-error"' in form and "Please wait 60 min" in form
    assert 'data-draft="instruction">Shorten &lt;it&gt;.</textarea>' in form
    assert not Turn.objects.exists()

    clock[0] += 3600
    with django_capture_on_commit_callbacks(execute=True):
        client.post(turn_url, {"instruction": "Shorten it.", "instruction_type": "stylistic"})
    assert Turn.objects.get().call_status == CallStatus.DONE


def test_a_new_session_over_the_model_call_limit_is_refused_with_when_to_retry(
    client, study, annotator, worker_rates, django_capture_on_commit_callbacks
):
    worker_rates(model_calls="1/hour")
    client.force_login(annotator)
    start = reverse("revision:start", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        session_id = int(client.post(start).url.strip("/").split("/")[-1])
    client.post(reverse("revision:finish", args=[session_id]))
    refused = client.post(start)
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert "Please wait 60 min" in refused.content.decode()
    assert RevisionSession.objects.count() == 1
    other = UserFactory(username="other-annotator", roles=[ANNOTATOR])
    client.force_login(other)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(start).status_code == 302  # per user: another is not held up


def test_an_instruction_refused_for_its_input_is_not_counted_as_a_model_call(
    client, study, annotator, worker_rates, django_capture_on_commit_callbacks
):
    """MODEL_CALL_RATE counts the calls sent: an instruction refused before anything was sent
    (its type not chosen, say) uses up none of the user's rate."""
    worker_rates(model_calls="2/hour")
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session_url = client.post(reverse("revision:start", args=[study.pk])).url  # 1
    turn_url = reverse("revision:turn-new", args=[int(session_url.strip("/").split("/")[-1])])
    for _ in range(3):
        refused = client.post(turn_url, {"instruction": "Shorten it."})  # no type chosen
        assert refused.status_code == 400 and "Please wait" not in refused.text
    with django_capture_on_commit_callbacks(execute=True):
        sent = client.post(
            turn_url, {"instruction": "Shorten it.", "instruction_type": "stylistic"}
        )
    assert sent.status_code == 302  # 2
    assert Turn.objects.filter(instruction="Shorten it.").exists()


def test_no_page_of_an_annotators_session_may_be_kept_by_a_browser_or_proxy(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """On a shared computer the back button (or a proxy) must not show the next person an
    annotator's session, a refused instruction they typed, or a re-rating: no-store."""
    rerating_url = reverse("revision:rerating", args=[rerating_of(study, annotator).pk])
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session_url = client.post(reverse("revision:start", args=[study.pk])).url
    session_id = int(session_url.strip("/").split("/")[-1])
    refused = client.post(reverse("revision:turn-new", args=[session_id]), {"instruction": "Hm."})
    assert refused.status_code == 400 and "Hm." in refused.content.decode()
    rerating = client.get(rerating_url)
    state = client.get(reverse("revision:session-state", args=[session_id]))
    for page in (client.get(session_url), refused, rerating, state):
        assert page.status_code in (200, 400)
        assert "no-store" in page["Cache-Control"] and "private" in page["Cache-Control"]


def test_an_instruction_or_comment_over_the_limit_is_refused_kept_and_never_sent(
    client, study, annotator, django_capture_on_commit_callbacks
):
    from annotate.revision.models import COMMENT_MAX_CHARS, INSTRUCTION_MAX_CHARS

    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    page = client.get(reverse("revision:session", args=[session.pk])).text
    assert (
        f'name="instruction" id="instruction" rows="3" required maxlength="{INSTRUCTION_MAX_CHARS}"'
        in page
    )
    too_long = "Shorter. " + "x" * INSTRUCTION_MAX_CHARS
    with django_capture_on_commit_callbacks(execute=True) as sent:
        refused = client.post(
            reverse("revision:turn-new", args=[session.pk]),
            {"instruction": too_long, "instruction_type": "stylistic"},
        )
    assert refused.status_code == 400 and not sent  # no model call enqueued
    form = refused.text.split('id="turn-form"')[1].split("</form>")[0]
    assert f"at most {INSTRUCTION_MAX_CHARS:,}" in form and f">{too_long}</textarea>" in form
    assert not Turn.objects.exists()

    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorter.")
    page = client.get(reverse("revision:session", args=[session.pk])).text
    assert f'maxlength="{COMMENT_MAX_CHARS}"' in page.split('id="rate-form"')[1]
    long_comment = "y" * (COMMENT_MAX_CHARS + 1)
    refused = client.post(
        reverse("revision:turn-rate", args=[session.pk]),
        {"rating": "bad", "comment": long_comment},
    )
    assert refused.status_code == 400 and f">{long_comment}</textarea>" in refused.text
    assert f"at most {COMMENT_MAX_CHARS:,}" in refused.text
    assert Turn.objects.get().rating == ""


def test_an_edited_answer_over_its_limit_is_refused_kept_and_a_long_answers_edit_is_taken(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """The edit's limit is the larger of EDITED_ANSWER_MAX_CHARS and the model's answer plus
    EDITED_ANSWER_MARGIN_CHARS: shown on the page, refused above it, never below a long answer."""
    from annotate.revision.models import EDITED_ANSWER_MARGIN_CHARS, EDITED_ANSWER_MAX_CHARS

    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorter.")
    url = reverse("revision:turn-rate", args=[session.pk])
    form = client.get(reverse("revision:session", args=[session.pk])).text
    form = form.split('id="rate-form"')[1]
    assert f'maxlength="{EDITED_ANSWER_MAX_CHARS}"' in form and "At most 20,000 characters" in form
    too_long = "w" * (EDITED_ANSWER_MAX_CHARS + 1)
    refused = client.post(url, {"rating": "bad", "comment": "Too long.", "edited_answer": too_long})
    assert refused.status_code == 400 and f">{too_long}</textarea>" in refused.text
    assert f"the edited answer is {EDITED_ANSWER_MAX_CHARS + 1:,} characters long" in refused.text
    assert f"at most {EDITED_ANSWER_MAX_CHARS:,}" in refused.text
    assert Turn.objects.get().rating == ""

    long_answer = "v" * (EDITED_ANSWER_MAX_CHARS * 2)  # a model's answer longer than the cap
    Turn.objects.update(answer=long_answer)
    limit = len(long_answer) + EDITED_ANSWER_MARGIN_CHARS
    assert f'maxlength="{limit}"' in client.get(reverse("revision:session", args=[session.pk])).text
    edit = long_answer + " One more sentence."
    taken = client.post(url, {"rating": "bad", "comment": "Needs more.", "edited_answer": edit})
    assert taken.status_code == 302 and Turn.objects.get().edited_answer == edit


def test_a_rerating_comment_over_the_limit_is_refused_and_kept(client, study, annotator):
    from annotate.revision.models import COMMENT_MAX_CHARS

    rerating = rerating_of(study, annotator)
    client.force_login(annotator)
    url = reverse("revision:rerating", args=[rerating.pk])
    assert f'maxlength="{COMMENT_MAX_CHARS}"' in client.get(url).text
    long_comment = "z" * (COMMENT_MAX_CHARS + 1)
    refused = client.post(url, {"rating": "bad", "comment": long_comment})
    assert refused.status_code == 400 and f">{long_comment}</textarea>" in refused.text
    assert f"at most {COMMENT_MAX_CHARS:,}" in refused.text
    rerating.refresh_from_db()
    assert rerating.status == "pending"


def test_home_links_the_annotators_own_finished_sessions_and_done_reratings_page_by_page(
    client, study, annotator, monkeypatch
):
    """Finished sessions and re-ratings given had no way back but typing the address: home
    lists them (the annotator's own only, a page at a time), each opening its read-only page."""
    first_question, second_question = study.questions.order_by("pk")
    beta = study.systems.get(name="beta")
    mine = [
        RevisionSession.objects.create(
            study=study,
            question=question,
            system=beta,
            annotator=annotator,
            status="finished",
            initial_answer="a0",
            created_at=timezone.now(),
            finished_at=timezone.now(),
        )  # fmt: skip
        for question in (first_question, second_question)
    ]
    done, pending = reratings_of(study, annotator, 2)  # on someone else's finished session
    done.status, done.rating, done.comment = "done", "bad", "No paper."
    done.rated_at = timezone.now()
    done.save()
    (theirs,) = reratings_of(study, UserFactory(roles=[ANNOTATOR]), 1, question=second_question)
    theirs.status, theirs.rating, theirs.rated_at = "done", "good", timezone.now()
    theirs.save()
    client.force_login(annotator)

    home = client.get(reverse("revision:home")).text
    finished = home.split('id="finished-sessions"')[1].split("</table>")[0]
    for session in mine:
        assert f'href="{reverse("revision:session", args=[session.pk])}"' in finished
    assert finished.count('href="/') == 2  # not the owner's of the re-rated turns
    rerated = home.split('id="rerated-turns"')[1].split("</ul>")[0]
    assert f'href="{reverse("revision:rerating", args=[done.pk])}"' in rerated
    assert "you rated it bad" in rerated and rerated.count('href="/') == 1  # not pending/theirs
    session_page = client.get(reverse("revision:session", args=[mine[0].pk])).text
    assert "This session is finished" in session_page
    assert (
        "You rated this bad: No paper."
        in client.get(reverse("revision:rerating", args=[done.pk])).text
    )

    monkeypatch.setattr("annotate.revision.views.DONE_PAGE_SIZE", 1)  # after the URLs load
    shown = set()
    for number in (1, 2):
        page = client.get(reverse("revision:home"), {"sessions_page": number}).text
        finished = page.split('id="finished-sessions"')[1].split("</table>")[0]
        assert finished.count('href="/') == 1
        shown |= {s.pk for s in mine if reverse("revision:session", args=[s.pk]) in finished}
    assert shown == {s.pk for s in mine}
    assert "sessions_page=2" in client.get(reverse("revision:home")).text


def test_every_session_and_rerating_action_is_limited_per_user_on_the_work_rate(
    client, study, annotator, worker_rates, django_capture_on_commit_callbacks
):
    """Starting, instructing, rating, withdrawing, ending and re-rating count on the annotator's
    work rate (scope "annotator-work"): past it 429 with Retry-After and nothing done; a rating
    refused keeps what was typed on the session page. Reading the pages is not counted."""
    clock = worker_rates(annotator_work="2/minute")
    rerating = rerating_of(study, annotator)
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(reverse("revision:start", args=[study.pk])).status_code == 302  # 1
    session = RevisionSession.objects.get(annotator=annotator)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(  # 2
            reverse("revision:turn-new", args=[session.pk]),
            {"instruction": "Shorten it.", "instruction_type": "stylistic"},
        )
    assert client.get(reverse("revision:session", args=[session.pk])).status_code == 200
    clock[0] += 10

    rated = client.post(
        reverse("revision:turn-rate", args=[session.pk]), {"rating": "good", "comment": "Fine."}
    )
    assert rated.status_code == 429 and rated["Retry-After"] == "50"
    html = rated.content.decode()
    assert (
        "Too many work requests from your account (at most 2/minute). Please wait 50 s and try "
        "again. Your rating was not saved." in html
    )
    assert 'data-draft="comment">Fine.</textarea>' in html  # kept
    assert Turn.objects.get(session=session).rating == ""
    assert client.post(reverse("revision:finish", args=[session.pk])).status_code == 429
    withdrawn = client.post(reverse("revision:withdraw", args=[session.pk]))
    assert withdrawn.status_code == 429 and "Nothing was withdrawn." in withdrawn.content.decode()
    given_up = client.post(reverse("revision:give-up", args=[session.pk]))
    assert given_up.status_code == 429
    assert "The session was not given up." in given_up.content.decode()
    assert RevisionSession.objects.get(pk=session.pk).status == "active"
    rerate_url = reverse("revision:rerating", args=[rerating.pk])
    assert client.get(rerate_url).status_code == 200
    rerated = client.post(rerate_url, {"rating": "bad", "comment": "No paper cited."})
    assert rerated.status_code == 429 and "Your rating was not saved." in rerated.content.decode()
    rerating.refresh_from_db()
    assert rerating.rating == ""

    clock[0] += 50
    client.post(
        reverse("revision:turn-rate", args=[session.pk]), {"rating": "good", "comment": "Fine."}
    )
    assert Turn.objects.get(session=session).rating == "good"


def _hidden_fields(page: str, form_marker: str) -> dict[str, str]:
    """The hidden fields of the page's form that holds `form_marker` (its id or action)."""
    import re

    form = page.split(form_marker)[1].split("</form>")[0]
    fields = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form)
    return {name: value for name, value in fields if name != "csrfmiddlewaretoken"}


def test_a_rating_from_an_out_of_date_tab_is_refused_not_saved_against_the_last_turn(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """Tab B shows turn 1's rating form; tab A rates turn 1 and does turn 2. Tab B's rating
    (meant for turn 1's answer) was saved against turn 2, which B never saw."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    first = instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")
    tab_b = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert _hidden_fields(tab_b, 'id="rate-form"') == {"turn": str(first.pk)}
    now = timezone.now()
    turn_rate(session_id=session.pk, user=annotator, rating="good", comment="ok", now=now)  # A
    second = instruct(django_capture_on_commit_callbacks, session, annotator, "Add the year.")
    sent = client.post(
        reverse("revision:turn-rate", args=[session.pk]),
        {
            "rating": "bad",
            "comment": "Not shorter.",
            **_hidden_fields(tab_b, 'id="rate-form"'),
        },
        follow=True,
    )
    page = sent.content.decode()
    assert sent.redirect_chain == [(reverse("revision:session", args=[session.pk]), 302)]
    assert "Your rating was not saved. This page was out of date" in page
    second.refresh_from_db()
    first.refresh_from_db()
    assert second.rating == "" and second.comment == "" and first.rating == "good"
    assert _hidden_fields(page, 'id="rate-form"') == {"turn": str(second.pk)}  # the form now


def test_an_instruction_or_satisfied_from_an_out_of_date_tab_is_refused(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """Tab B shows the form after the initial answer; tab A does turn 1 and rates it. B's
    instruction was sent as turn 2 (revising an answer B never saw), B's "I am satisfied"
    ended the session on that answer."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    tab_b = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    finish = reverse("revision:finish", args=[session.pk])
    assert _hidden_fields(tab_b, 'id="turn-form"') == {"position": "1"}
    assert _hidden_fields(tab_b, f'action="{finish}"') == {"turns": "0"}
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")  # tab A
    turn_rate(session_id=session.pk, user=annotator, rating="bad", comment="no", now=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        sent = client.post(
            reverse("revision:turn-new", args=[session.pk]),
            {
                "instruction": "Add the year.",
                "instruction_type": "stylistic",
                **_hidden_fields(tab_b, 'id="turn-form"'),
            },
            follow=True,
        )
    assert "Your instruction was not sent (&quot;Add the year.&quot;)" in sent.content.decode()
    assert Turn.objects.filter(session=session).count() == 1
    ended = client.post(finish, _hidden_fields(tab_b, f'action="{finish}"'), follow=True)
    assert "The session was not ended. This page was out of date" in ended.content.decode()
    assert RevisionSession.objects.get(pk=session.pk).status == "active"
    # The page as it is now sends what it shows, and is taken.
    now_page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert _hidden_fields(now_page, f'action="{finish}"') == {"turns": "1"}
    client.post(finish, _hidden_fields(now_page, f'action="{finish}"'))
    assert RevisionSession.objects.get(pk=session.pk).status == "finished"


def test_a_failed_call_tells_the_annotator_nothing_of_the_system_and_researchers_all(
    client, study, annotator, admin_user, django_capture_on_commit_callbacks
):
    """The page showed the call's error as it was: the endpoint's name, its API key's variable,
    a provider's message naming the model: which system the annotator rates."""
    secret = "Endpoint 'gpt-4o-secret': set the environment variable OPENAI_API_KEY"
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    session_url = reverse("revision:session", args=[session.pk])
    RevisionSession.objects.filter(pk=session.pk).update(
        initial_status=CallStatus.FAILED, initial_error=secret
    )
    page = client.get(session_url).content.decode()
    assert "The model did not answer." in page and 'id="retry"' in page
    assert "gpt-4o-secret" not in page and "OPENAI_API_KEY" not in page
    RevisionSession.objects.filter(pk=session.pk).update(initial_status=CallStatus.DONE)
    turn = instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")
    Turn.objects.filter(pk=turn.pk).update(call_status=CallStatus.FAILED, call_error=secret)
    page = client.get(session_url).content.decode()
    assert "The model did not answer." in page and 'id="withdraw"' in page
    assert "gpt-4o-secret" not in page and "OPENAI_API_KEY" not in page
    admin_user.is_superuser = True  # the admin site keeps the detail (and the log)
    admin_user.save()
    client.force_login(admin_user)
    admin_page = client.get(reverse("admin:revision_turn_change", args=[turn.pk]))
    assert "gpt-4o-secret" in admin_page.content.decode()


def test_an_annotator_gives_up_a_session_whose_first_answer_keeps_failing(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """With the endpoint failing on the initial answer, only Retry was shown: the session
    stayed in progress for ever, "Start a session" always came back to it, and its (question,
    system) stayed taken for every annotator."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    RevisionSession.objects.filter(pk=session.pk).update(
        initial_status=CallStatus.FAILED, initial_error="no API key", initial_answer=""
    )
    session_url = reverse("revision:session", args=[session.pk])
    give_up = reverse("revision:give-up", args=[session.pk])
    page = client.get(session_url).content.decode()
    assert f'action="{give_up}"' in page and 'id="give-up"' in page

    left = client.post(give_up, follow=True)
    assert left.redirect_chain == [(reverse("revision:home"), 302)]
    assert "You gave up the session" in left.content.decode()
    assert '<td>live</td><td>0 <span class="tags"' in left.content.decode()  # counted nowhere
    assert "(and 1 given up: counted nowhere)" in left.content.decode()
    assert client.get(session_url).status_code == 200
    # Start a session answers with another question, not the one given up.
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("revision:start", args=[study.pk]))
    again = RevisionSession.objects.exclude(pk=session.pk).get(annotator=annotator)
    assert again.question_id != session.question_id
    assert response.url == reverse("revision:session", args=[again.pk])


def test_a_session_given_up_is_kept_with_who_and_when_and_its_pair_is_not_handed_out_again(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """Giving up deleted the session: no trace of it, and its (question, system) went to the
    next annotator to start (or back to the same one) while the endpoint still failed."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    RevisionSession.objects.filter(pk=session.pk).update(
        initial_status=CallStatus.FAILED, initial_error="no API key", initial_answer=""
    )
    pair = (session.question_id, session.system_id)
    before = timezone.now()
    client.post(reverse("revision:give-up", args=[session.pk]))

    kept = RevisionSession.objects.get(pk=session.pk)
    assert (kept.status, kept.given_up_by) == ("given-up", annotator)
    assert kept.given_up_at >= before and kept.finished_at is None
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert 'id="given-up"' in page and "You gave up this session" in page
    # Written as every page writes dates (config/formats): 2026-11-28 17:05 UTC.
    assert f"on {kept.given_up_at:%Y-%m-%d %H:%M} UTC:" in page
    assert 'id="retry"' not in page and 'id="give-up"' not in page
    retried = client.post(reverse("revision:retry", args=[session.pk]), follow=True)
    assert "the session was given up" in retried.content.decode()
    kept.refresh_from_db()
    assert (kept.status, kept.initial_status) == ("given-up", CallStatus.FAILED)
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert "Next session" in page  # another question is left for them
    other = UserFactory(username="second-annotator", roles=[ANNOTATOR])
    with django_capture_on_commit_callbacks(execute=True):
        taken = session_assign(study=study, user=other, now=timezone.now())
    assert (taken.question_id, taken.system_id) != pair


def test_a_session_with_a_rated_turn_or_no_failure_cannot_be_given_up(
    client, study, annotator, django_capture_on_commit_callbacks
):
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    session_url = reverse("revision:session", args=[session.pk])
    give_up = reverse("revision:give-up", args=[session.pk])
    assert 'id="give-up"' not in client.get(session_url).content.decode()
    refused = client.post(give_up, follow=True).content.decode()
    assert "The session was not given up: only a session whose model call failed" in refused
    instruct(django_capture_on_commit_callbacks, session, annotator, "Shorten it.")
    turn_rate(
        session_id=session.pk, user=annotator, rating="good", comment="ok", now=timezone.now()
    )
    failed = instruct(django_capture_on_commit_callbacks, session, annotator, "Add the year.")
    Turn.objects.filter(pk=failed.pk).update(call_status=CallStatus.FAILED, call_error="down")
    page = client.get(session_url).content.decode()
    assert 'id="withdraw"' in page and 'id="give-up"' not in page
    assert "Retry, or withdraw your instruction." in page
    refused = client.post(give_up, follow=True).content.decode()
    assert "a session with a rated turn is ended, not given up" in refused
    assert Turn.objects.filter(session=session).count() == 2
    client.force_login(UserFactory(username="someone-else", roles=[ANNOTATOR]))
    assert client.post(give_up).status_code == 404


def test_a_later_turn_that_fails_keeps_the_answer_it_revises_and_the_last_passages(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """A failed turn 2 hid the answer its instruction was for, and the passages beside it said
    "None yet." though turn 1 had retrieved some."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    first = instruct(
        django_capture_on_commit_callbacks, session, annotator, "Cite more.", "information-seeking"
    )
    first.refresh_from_db()
    assert first.call_status == CallStatus.DONE and first.passages
    Turn.objects.filter(pk=first.pk).update(answer="The <b>revised</b> answer [0].")
    turn_rate(session_id=session.pk, user=annotator, rating="good", comment="c", now=timezone.now())
    second = turn_start(
        session_id=session.pk,
        user=annotator,
        instruction="Cite the second paper.",
        instruction_type="information-seeking",
        now=timezone.now(),
    )  # fmt: skip  (its call is never run here)
    Turn.objects.filter(pk=second.pk).update(call_status=CallStatus.FAILED, call_error="down")
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert 'id="retry"' in page
    assert (
        '<pre class="text answer" id="answer" aria-labelledby="revised-title">'
        "The &lt;b&gt;revised&lt;/b&gt; answer [0].</pre>"
    ) in page
    assert "None yet." not in page and 'class="passage"' in page
    assert page.count('class="passage"') == len(first.passages)


def test_a_retry_that_fails_again_says_it_was_tried_again(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """After Retry failed again the page looked exactly as before: no sign of the retry."""
    client.force_login(annotator)
    # Now, to the minute: the session's calls must be younger than the call timeout on the
    # real clock the page reads (a fixed 09:00 of today made it fail from 09:05 to 10:00).
    start = timezone.now().replace(second=0, microsecond=0)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=start)
    turn = turn_start(
        session_id=session.pk,
        user=annotator,
        instruction="Shorten it.",
        instruction_type="stylistic",
        now=start,
    )  # fmt: skip  (its call is never run here)
    failed = {"call_status": CallStatus.FAILED, "call_error": "down"}
    Turn.objects.filter(pk=turn.pk).update(**failed)
    url = reverse("revision:session", args=[session.pk])
    assert 'id="retried"' not in client.get(url).content.decode()  # failed on its first try
    call_retry(session_id=session.pk, user=annotator, now=start + timedelta(minutes=7))
    Turn.objects.filter(pk=turn.pk).update(**failed)
    page = client.get(url).content.decode()
    assert (
        f'<p id="retried">Tried again at {start + timedelta(minutes=7):%H:%M} UTC: the model failed'
        " again (its service answered with an error or could not be reached).</p>"
    ) in page

    # The first answer too.
    other = UserFactory(username="retry-first", roles=[ANNOTATOR])
    client.force_login(other)
    session = session_assign(study=study, user=other, now=start)  # its call is never run here
    RevisionSession.objects.filter(pk=session.pk).update(initial_status=CallStatus.FAILED)
    url = reverse("revision:session", args=[session.pk])
    assert 'id="retried"' not in client.get(url).content.decode()
    call_retry(session_id=session.pk, user=other, now=start + timedelta(minutes=12))
    stale_calls_fail(session=session, now=start + timedelta(minutes=12) + STALE_AFTER * 2)
    page = client.get(url).content.decode()
    assert (
        f'<p id="retried">Tried again at {start + timedelta(minutes=12):%H:%M} UTC: the model failed'
        " again (it did not finish in time).</p>"
    ) in page


def test_a_first_answer_that_keeps_failing_says_what_to_do(client, study, annotator):
    """Later turns said "Still failing?"; the first answer's failure said nothing of it."""
    client.force_login(annotator)
    session = session_assign(study=study, user=annotator, now=timezone.now())
    RevisionSession.objects.filter(pk=session.pk).update(initial_status=CallStatus.FAILED)
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert "Still failing? Retry later: the session waits for you. Or <button" in page
    assert 'id="give-up"' in page


def test_home_says_why_no_question_is_left_when_a_given_up_session_holds_it(
    client, tmp_path, django_capture_on_commit_callbacks
):
    """A session given up counted 0 under "Your sessions", and another annotator then read
    "No question left for you" with no reason while the given-up session held the question."""
    path = tmp_path / "one-system.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    study_upload(path=str(path), study_name="one", systems=["solo"])
    study = Study.objects.get(name="one")
    quitter = UserFactory(username="quitter", roles=[ANNOTATOR])
    busy = UserFactory(username="busy", roles=[ANNOTATOR])
    late = UserFactory(username="late", roles=[ANNOTATOR, RESEARCHER])
    now = timezone.now()
    given_up = session_assign(study=study, user=quitter, now=now)
    RevisionSession.objects.filter(pk=given_up.pk).update(
        status="given-up", given_up_at=now, given_up_by=quitter
    )
    session_assign(study=study, user=busy, now=now)  # the other question, in progress

    client.force_login(quitter)
    page = client.get(reverse("revision:home")).content.decode()
    assert f'<td>0 <span class="tags" id="given-up-{study.pk}">(and 1 given up' in page

    client.force_login(late)
    page = client.get(reverse("revision:home")).content.decode()
    assert (
        "No question left for you<span "
        f'id="held-{study.pk}"> now: 1 session given up when the model did not answer holds a'
        " question you have not seen, until a researcher reopens it"
    ) in page
    report = reverse("revision-reports:report", args=[study.pk])
    assert f'<a href="{report}#given-up-sessions">' in page
    assert "solo" not in page  # the system's name is never shown

    client.force_login(busy)  # seen both questions: nothing is held from them
    page = client.get(reverse("revision:home")).content.decode()
    assert f'id="held-{study.pk}"' not in page


def _one_system_study(tmp_path, name: str = "one") -> Study:
    path = tmp_path / "one-system.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    study_upload(path=str(path), study_name=name, systems=["solo"])
    return Study.objects.get(name=name)


def _finished(study, user, now) -> RevisionSession:
    session = session_assign(study=study, user=user, now=now)
    RevisionSession.objects.filter(pk=session.pk).update(status="finished", finished_at=now)
    return session


def _no_question_left(client, study) -> tuple[str, str]:
    """The home row's reason and the message a click on Start would give."""
    page = client.get(reverse("revision:home")).content.decode()
    assert "Start a session" not in page
    row = page.split(f'<span id="why-{study.pk}">')[1].split("</span>")[0]
    started = client.post(reverse("revision:start", args=[study.pk]), follow=True)
    messages = [str(m) for m in started.context["messages"]]
    assert len(messages) == 1 and messages[0].startswith("no question is left for you in this")
    return row, messages[0]


def test_no_question_left_says_it_is_because_the_annotator_did_every_question(client, tmp_path):
    """ "No question left for you" said no reason when no given-up session held a question."""
    study = _one_system_study(tmp_path)
    annotator = UserFactory(username="done", roles=[ANNOTATOR])
    now = timezone.now()
    last = [_finished(study, annotator, now) for _ in QUESTIONS][-1]
    client.force_login(annotator)
    reason = (
        "you have had a session on each of its 2 questions, and an annotator gets a question once"
    )
    assert _no_question_left(client, study) == (f": {reason}.", f"{_LEFT}: {reason}")
    page = client.get(reverse("revision:session", args=[last.pk])).content.decode()
    assert f"No question of this study is left for you: {reason}." in page


def test_no_question_left_says_other_annotators_have_every_question_and_model(client, tmp_path):
    study = _one_system_study(tmp_path)
    now = timezone.now()
    for name in ("first", "second"):  # one question each, with the study's only model
        _finished(study, UserFactory(username=name, roles=[ANNOTATOR]), now)
    client.force_login(UserFactory(username="late", roles=[ANNOTATOR]))
    reason = "each of its 2 questions already has a session with every model, by other annotators"
    assert _no_question_left(client, study) == (f": {reason}.", f"{_LEFT}: {reason}")
    assert f'id="held-{study.pk}"' not in client.get(reverse("revision:home")).content.decode()


def test_no_question_left_says_which_questions_are_the_annotators_and_which_others(
    client, tmp_path
):
    study = _one_system_study(tmp_path)
    now = timezone.now()
    mine = UserFactory(username="mine", roles=[ANNOTATOR])
    _finished(study, mine, now)
    _finished(study, UserFactory(username="other", roles=[ANNOTATOR]), now)  # the second
    client.force_login(mine)
    reason = (
        "you have had a session on 1 of its 2 questions, and the other already has a session "
        "with every model, by other annotators"
    )
    assert _no_question_left(client, study) == (f": {reason}.", f"{_LEFT}: {reason}")


def test_no_question_left_after_a_held_question_still_says_whose_the_others_are(client, tmp_path):
    """The held note (a given-up session) is followed by what holds the rest."""
    study = _one_system_study(tmp_path)
    now = timezone.now()
    quitter = UserFactory(username="quitter", roles=[ANNOTATOR])
    _given_up(session_assign(study=study, user=quitter, now=now), quitter, now)
    _finished(study, UserFactory(username="other", roles=[ANNOTATOR]), now)
    client.force_login(UserFactory(username="late", roles=[ANNOTATOR]))
    page = client.get(reverse("revision:home")).content.decode()
    assert (
        "until a researcher reopens it.</span>"
        f'<span id="why-{study.pk}"> Each of its 2 questions already has a session with every '
        "model, by other annotators.</span>"
    ) in page


@pytest.mark.parametrize("what", ["no question", "no live system", "no system"])
def test_starting_a_study_with_nothing_to_answer_says_what_it_lacks(client, tmp_path, what):
    """Not listed on the home page, but a Start sent from a page loaded before the study lost
    its model (or for a study with no question) said "no question is left for you" as if the
    annotator had done them."""
    annotator = UserFactory(username="eager", roles=[ANNOTATOR])
    if what == "no question":
        study = Study.objects.create(name="empty", created_at=timezone.now())
        StudySystem.objects.create(study=study, name="solo")
        reason = "no question with papers to answer from has been imported into it yet"
    elif what == "no live system":
        study = _one_system_study(tmp_path)
        StudySystem.objects.filter(study=study).update(live=False)
        reason = "no model is offered in it now"
    else:
        study = _one_system_study(tmp_path)
        StudySystem.objects.filter(study=study).delete()
        reason = "it has no model for annotators to work with yet"
    client.force_login(annotator)
    started = client.post(reverse("revision:start", args=[study.pk]), follow=True)
    assert [str(m) for m in started.context["messages"]] == [f"{_LEFT}: {reason}"]
    assert not RevisionSession.objects.exists()


_LEFT = "no question is left for you in this study"


def test_an_annotator_who_did_every_question_is_told_so_after_the_models_are_unticked(
    client, tmp_path
):
    """Unticking the study's models told the annotator who had done both questions that it
    had "no model for annotators to work with yet"."""
    study = _one_system_study(tmp_path)
    annotator = UserFactory(username="done", roles=[ANNOTATOR])
    now = timezone.now()
    last = [_finished(study, annotator, now) for _ in QUESTIONS][-1]
    StudySystem.objects.filter(study=study).update(live=False)
    client.force_login(annotator)
    reason = (
        "you have had a session on each of its 2 questions, and an annotator gets a question once"
    )
    started = client.post(reverse("revision:start", args=[study.pk]), follow=True)
    assert [str(m) for m in started.context["messages"]] == [f"{_LEFT}: {reason}"]
    page = client.get(reverse("revision:session", args=[last.pk])).content.decode()
    assert f"No question of this study is left for you: {reason}." in page


def test_a_session_reopened_while_start_says_why_nothing_is_left_is_not_denied(
    client, tmp_path, monkeypatch
):
    """Start found no free pair, then a researcher reopened a given-up session before the reason
    was read: the reason said every question already had a session with every model, while one
    was free for the annotator."""
    from annotate.revision.services import sessions

    study = _one_system_study(tmp_path)
    now = timezone.now()
    quitter = UserFactory(username="quitter", roles=[ANNOTATOR])
    _given_up(session_assign(study=study, user=quitter, now=now), quitter, now)
    _finished(study, UserFactory(username="other", roles=[ANNOTATOR]), now)
    researcher = UserFactory(username="researcher", roles=[RESEARCHER])
    late = UserFactory(username="late", roles=[ANNOTATOR])
    client.force_login(late)
    held = "each of its 2 questions already has a session with every model, by other annotators"
    assert _no_question_left(client, study)[1] == f"{_LEFT}: {held}"

    free_pair = sessions._free_pair
    checks = []

    def reopened_after_the_first_check(**kwargs):
        found = free_pair(**kwargs)
        if not checks:  # inside Start's transaction here, so undone with its refusal
            session_reopen(session_id=given_up.pk, user=researcher, now=timezone.now())
        checks.append(found)
        return found

    given_up = RevisionSession.objects.get(annotator=quitter)
    monkeypatch.setattr(sessions, "_free_pair", reopened_after_the_first_check)
    started = client.post(reverse("revision:start", args=[study.pk]), follow=True)
    assert checks[0] is None and checks[1] is not None  # Start's check, then the reason's
    assert [str(m) for m in started.context["messages"]] == [
        f"{_LEFT}: a question came free for you just as this was checked; try again"
    ]
    monkeypatch.undo()
    session_reopen(session_id=given_up.pk, user=researcher, now=timezone.now())
    client.post(reverse("revision:start", args=[study.pk]))  # trying again
    assert RevisionSession.objects.filter(annotator=late).exists()


def _given_up(session, user, now) -> None:
    RevisionSession.objects.filter(pk=session.pk).update(
        status="given-up", given_up_at=now, given_up_by=user
    )


def test_the_annotator_who_gave_up_is_not_told_their_own_session_holds_a_question(client, tmp_path):
    """The seen-question exclusion of `held` (selectors.studies_for_annotator) is what keeps
    the annotator who gave the session up from reading that it "holds a question you have not
    seen". test_home_says_why_no_question_is_left_... never checks it: its last check (busy)
    passes because busy has a session in progress (row.open), whatever `held` is."""
    path = tmp_path / "one-system.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    study_upload(path=str(path), study_name="one", systems=["solo"])
    study = Study.objects.get(name="one")
    quitter = UserFactory(username="quitter", roles=[ANNOTATOR])
    busy = UserFactory(username="busy", roles=[ANNOTATOR])
    now = timezone.now()
    _given_up(session_assign(study=study, user=quitter, now=now), quitter, now)
    session_assign(study=study, user=busy, now=now)  # the other question

    client.force_login(quitter)
    page = client.get(reverse("revision:home")).content.decode()
    assert "No question left for you" in page  # the row the held note would follow
    assert f'id="held-{study.pk}"' not in page  # their own session, on a question they saw


def test_a_given_up_session_of_a_system_no_longer_live_holds_nothing(client, tmp_path):
    """`held` counts every given-up, not reopened session on an unseen question, also one whose
    system is not live any more (unticked in the admin): reopening it gives nobody anything, yet
    /revision/ says it holds a question until a researcher reopens it. The report's own count
    (study_collection_progress) keeps to live systems and questions with papers."""
    path = tmp_path / "two-systems.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    study_upload(path=str(path), study_name="two", systems=["solo", "duo"])
    study = Study.objects.get(name="two")
    quitter = UserFactory(username="quitter", roles=[ANNOTATOR])
    now = timezone.now()
    given_up = session_assign(study=study, user=quitter, now=now)
    assert given_up.system.name == "solo"
    _given_up(given_up, quitter, now)
    StudySystem.objects.filter(study=study, name="solo").update(live=False)
    for name in ("a1", "a2"):  # duo on both questions
        session_assign(study=study, user=UserFactory(username=name, roles=[ANNOTATOR]), now=now)
    late = UserFactory(username="late", roles=[ANNOTATOR])

    client.force_login(late)
    page = client.get(reverse("revision:home")).content.decode()
    assert "No question left for you" in page
    assert f'id="held-{study.pk}"' not in page, "a pair of a system not live holds nothing"


def test_a_failed_later_turn_page_runs_a_fixed_number_of_queries(
    client, study, annotator, django_capture_on_commit_callbacks, django_assert_num_queries
):
    """hwalk2 changed the failed-turn page (answer revised, passages of the last answered
    information-seeking turn): one query more than before (8 at bedcee6a: no passages were
    read), the passages' own, as on every page showing passages; fixed, not per turn. One
    more reads the account's block, as the page offers Retry (a block refuses it). The call's
    error (endpoint, model) is not on the page."""
    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    instruct(django_capture_on_commit_callbacks, session, annotator, "Cite.", "information-seeking")
    turn_rate(session_id=session.pk, user=annotator, rating="good", comment="c", now=timezone.now())
    second = turn_start(
        session_id=session.pk, user=annotator, instruction="More.",
        instruction_type="information-seeking", now=timezone.now(),
    )  # fmt: skip
    Turn.objects.filter(pk=second.pk).update(
        call_status=CallStatus.FAILED, call_error="gpt-x at https://secret.example/v1: 500"
    )
    url = reverse("revision:session", args=[session.pk])
    client.get(url)
    # session, user, the session with study/question/system, stale update, call fields,
    # titles, turns, the last passages, the account's block (the page offers Retry, which a
    # block refuses), the navigation's roles
    with django_assert_num_queries(10):
        page = client.get(url).content.decode()
    assert "secret.example" not in page and "gpt-x" not in page


def _passage_titles(html: str) -> list[str]:
    """The numbered titles of the passages shown, "[0] Paper Zero"..., in order."""
    import re

    found = re.findall(r'<span class="passage-number">(\[\d+\])</span> ([^<]*)</p>', html)
    return [f"{number} {title}" for number, title in found]


def test_the_session_page_numbers_the_passages_the_answer_cites_a0s_before_turn_1(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """The answer cites "[0]" (the prompt's first retrieved passage, KIWI A.1), but the passages
    showed titles only, the Papers list was numbered 0-2 instead, and before turn 1 the
    passages of a0 were not said to be a0's."""
    from annotate.revision.models import Passage

    client.force_login(annotator)
    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    session.refresh_from_db()
    assert session.initial_passages
    titles = Passage.objects.select_related("document").in_bulk(session.initial_passages)
    expected = [
        f"[{n}] {titles[pk].document.title}" for n, pk in enumerate(session.initial_passages)
    ]
    url = reverse("revision:session", args=[session.pk])
    page = client.get(url).content.decode()
    aside = page.split('id="passages"')[1].split("</aside>")[0]
    assert _passage_titles(aside) == expected
    assert "Retrieved for the question to write the initial answer: the answer's [0]" in aside
    assert '<ol class="titles"' not in page  # the papers are not what [0] cites
    first = instruct(
        django_capture_on_commit_callbacks, session, annotator, "Cite more.", "information-seeking"
    )
    first.refresh_from_db()
    titles = Passage.objects.select_related("document").in_bulk(first.passages)
    aside = client.get(url).content.decode().split('id="passages"')[1].split("</aside>")[0]
    assert _passage_titles(aside) == [
        f"[{n}] {titles[pk].document.title}" for n, pk in enumerate(first.passages)
    ]
    assert "Retrieved for turn 1's instruction" in aside
    # Turn 1's answer keeps a0's citations, which cite a0's passages, not the ones shown now.
    assert "the answer's [0]" not in aside
    assert "citations kept from earlier answers refer to earlier retrievals." in aside
    read = client.get(reverse("revision:session-read", args=[session.pk]))
    assert read.status_code == 403  # an annotator; a researcher reads it below
    client.force_login(UserFactory(username="passages-reader", roles=[RESEARCHER]))
    read = client.get(reverse("revision:session-read", args=[session.pk])).content.decode()
    turn = read.split('id="passages-1"')[1].split("</summary>")[0]
    assert "citations kept from earlier answers refer to earlier retrievals" in turn


def test_a_researcher_reads_any_session_turn_by_turn_annotators_only_their_own(
    client, study, annotator, django_capture_on_commit_callbacks
):
    """/revision/sessions/<id>/ answered researchers 404 (it is the annotator's own page): they
    could read a session only in the JSONL/CSV downloads."""
    from annotate.revision.models import Passage

    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    first = instruct(
        django_capture_on_commit_callbacks,
        session,
        annotator,
        "Add <i>results</i>.",
        "information-seeking",
    )
    Turn.objects.filter(pk=first.pk).update(answer="The <b>revised</b> answer [0].")
    turn_rate(session_id=session.pk, user=annotator, rating="neutral", comment="Half <u>done</u>.",
              edited_answer="My <em>edit</em> [1].", now=timezone.now())  # fmt: skip
    first.refresh_from_db()
    read = reverse("revision:session-read", args=[session.pk])
    client.force_login(UserFactory(username="reader", roles=[RESEARCHER]))
    assert client.get(reverse("revision:session", args=[session.pk])).status_code == 404
    response = client.get(read)
    assert response.status_code == 200
    page = response.content.decode()
    turn = page.split('id="turn-1"')[1].split("</section>")[0]
    assert "Turn 1 · Information-seeking" in turn
    assert "Add &lt;i&gt;results&lt;/i&gt;." in turn
    assert "The &lt;b&gt;revised&lt;/b&gt; answer [0]." in turn
    assert "My &lt;em&gt;edit&lt;/em&gt; [1]." in turn
    assert "Neutral" in turn and "Half &lt;u&gt;done&lt;/u&gt;." in turn
    assert "<b>" not in page and "<em>" not in page  # model and annotator text as text
    titles = Passage.objects.select_related("document").in_bulk(first.passages)
    assert _passage_titles(turn) == [
        f"[{n}] {titles[pk].document.title}" for n, pk in enumerate(first.passages)
    ]
    session.refresh_from_db()
    initial = page.split('id="turn-0"')[1].split("</section>")[0]
    assert len(_passage_titles(initial)) == len(session.initial_passages) > 0
    assert annotator.get_username() in page
    report = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert f'href="{read}"' in report.split('id="table-sessions"')[1]
    for user in (annotator, UserFactory(username="another", roles=[ANNOTATOR])):
        client.force_login(user)
        assert client.get(read).status_code == 403
    client.force_login(annotator)
    assert client.get(reverse("revision:session", args=[session.pk])).status_code == 200


def test_a_session_record_is_read_in_four_queries_three_without_passages(
    study, annotator, django_capture_on_commit_callbacks, django_assert_num_queries
):
    """Its docstring said three queries; with passages retrieved it runs a fourth for them."""
    from annotate.revision.selectors import session_record_get

    with django_capture_on_commit_callbacks(execute=True):
        session = session_assign(study=study, user=annotator, now=timezone.now())
    session.refresh_from_db()
    assert session.initial_passages
    with django_assert_num_queries(4):
        record = session_record_get(session_id=session.pk)
    assert len(record.initial_passages) == len(session.initial_passages)
    RevisionSession.objects.filter(pk=session.pk).update(initial_passages=[])
    with django_assert_num_queries(3):
        record = session_record_get(session_id=session.pk)
    assert record.initial_passages == []
