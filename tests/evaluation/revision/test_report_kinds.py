"""The KIWI report, its figures' cache key and the session exports follow the annotator-kind rule:
a session of a web account whose kind no researcher has decided counts nowhere until it is.

The sample study (sample.py) has gpt-4 with 2 imported sessions of 3 rated turns and llama with
1 imported session of 3 rated turns (1 good). `newbie`, a new web account, adds a finished llama
session on Q2 of one rated turn, good and stylistic: left out, llama reads 1 session, 3 turns,
1 good of 3; once newbie's kind is decided, 2 sessions, 4 turns, 2 good of 4 (50%). A block
of newbie's account takes its work out again until it is unblocked, as for a blocked worker's
labels.
"""

import json
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.services import review
from annotate.models import AnnotatorKind
from annotate.revision import counting
from annotate.revision.models import Rerating, RevisionSession, SessionStatus, Turn
from annotate.revision.services.exports import (
    app_session_records,
    sessions_export_csv,
    sessions_export_jsonl,
)
from annotate.roles import ANNOTATOR
from annotate.services.annotators import annotator_kind_set
from annotate.services.assignments import annotator_for_user
from evaluation.revision.figures import revision_figure_cached
from evaluation.revision.judges import rating_split
from evaluation.revision.models import JudgeTask
from evaluation.revision.report_data import figure_fingerprint
from evaluation.revision.reports import revision_report_build
from evaluation.revision.selectors import rated_turns_count
from tests.evaluation.revision.sample import sample_study
from tests.factories import UserFactory
from tests.threads import in_thread

pytestmark = pytest.mark.django_db

LEFT_OUT = (
    "1 finished session by 1 annotator whose kind is not decided yet is left out of every "
    "table and figure"
)


def web_session(study, user, *, question="Q2?", system="llama", rating="good") -> RevisionSession:
    """A session `user` finished in the app: one rated stylistic turn."""
    now = timezone.now()
    session = RevisionSession.objects.create(
        study=study,
        question=study.questions.get(text=question),
        system=study.systems.get(name=system),
        annotator=user,
        status=SessionStatus.FINISHED,
        initial_answer="d0",
        created_at=now,
        finished_at=now,
    )
    Turn.objects.create(
        session=session,
        position=1,
        instruction="Use bullet points.",
        instruction_type="stylistic",
        previous_answer="d0",
        answer="- d0",
        rating=rating,
    )
    return session


@pytest.fixture
def newbie(db):
    """A new web account that has worked: its Annotator exists, its kind not decided."""
    user = UserFactory(username="newbie", roles=[ANNOTATOR])
    annotator_for_user(user=user)
    return user


def decide(user, kind=AnnotatorKind.EXPERT):
    annotator_kind_set(annotator=user.annotator, kind=kind, now=timezone.now())


def llama(report):
    row = report["table2"][1]
    ratings = next(
        r
        for r in report["figure2_ratings"]
        if r["system"] == "llama" and r["instruction_type"] == "all"
    )
    return row["sessions"], row["turns"], ratings["good"]


def test_an_undecided_accounts_session_counts_once_its_kind_is_decided(tmp_path, newbie):
    study = sample_study(tmp_path)
    web_session(study, newbie)
    report = revision_report_build(study=study, n_resamples=10)
    assert llama(report) == (1, 3, pytest.approx(1 / 3))
    assert report["turns"] == 6
    assert report["waiting_for_kind"] == {
        "sessions": 1,
        "annotators": 1,
        "reratings": 0,
        "raters": 0,
    }
    decide(newbie)
    report = revision_report_build(study=study, n_resamples=10)
    assert llama(report) == (2, 4, pytest.approx(2 / 4))
    assert report["turns"] == 7
    assert report["waiting_for_kind"]["sessions"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_kind_decided_while_the_report_is_read_leaves_the_session_in_one_place(
    tmp_path, newbie, monkeypatch
):
    """A researcher decides newbie's kind after the report read the turns (newbie's session
    left out) and before it counted the work waiting for a kind (none: decided): the session
    was in no table and not said to be waiting either. Read as of one moment, it waits; the
    next report counts it. The kind is decided on a connection of its own, as a researcher's
    request would."""
    study = sample_study(tmp_path)
    web_session(study, newbie)
    waiting_q, decided = counting.session_waiting_for_kind_q, []

    def decided_first(*args, **kwargs):
        if not decided:
            in_thread(lambda: decide(newbie), decided).join(30)
        return waiting_q(*args, **kwargs)

    monkeypatch.setattr(counting, "session_waiting_for_kind_q", decided_first)
    report = revision_report_build(study=study, n_resamples=10)
    assert decided == [None]
    assert llama(report)[:2] == (1, 3)
    assert report["waiting_for_kind"]["sessions"] == 1
    report = revision_report_build(study=study, n_resamples=10)
    assert llama(report)[:2] == (2, 4)
    assert report["waiting_for_kind"]["sessions"] == 0


def test_an_account_without_an_annotator_is_not_decided(tmp_path):
    """An account that only ever steered KIWI sessions has no Annotator row: not decided."""
    study = sample_study(tmp_path)
    web_session(study, UserFactory(username="kiwi-only", roles=[ANNOTATOR]))
    report = revision_report_build(study=study, n_resamples=10)
    assert llama(report)[:2] == (1, 3)
    assert report["waiting_for_kind"]["sessions"] == 1


def test_page_json_and_command_say_what_was_left_out(client, researcher, tmp_path, newbie):
    study = sample_study(tmp_path)
    web_session(study, newbie)
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    assert LEFT_OUT in page.content.decode()
    assert page.context["tables"][0]["rows"][1][1]["text"] == "1"  # llama's sessions
    api = client.get(reverse("api-revision-report", args=[study.pk])).json()
    assert api["waiting_for_kind"]["sessions"] == 1 and api["table2"][1]["sessions"] == 1
    out = StringIO()
    call_command("revision_report", "--study", study.name, "--format", "md", stdout=out)
    assert LEFT_OUT in out.getvalue()
    out = StringIO()
    call_command("revision_report", "--study", study.name, "--format", "csv", stdout=out)
    assert "# waiting_for_kind\r\nsessions,annotators,reratings,raters\r\n1,1,0,0\r\n" in (
        out.getvalue()
    )

    decide(newbie)
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    assert "whose kind is not decided" not in page.content.decode()
    assert page.context["tables"][0]["rows"][1][1]["text"] == "2"
    api = client.get(reverse("api-revision-report", args=[study.pk])).json()
    assert api["waiting_for_kind"]["sessions"] == 0 and api["table2"][1]["sessions"] == 2
    out = StringIO()
    call_command("revision_report", "--study", study.name, "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["table2"][1]["sessions"] == 2


def test_the_figures_cache_key_moves_with_a_kind_decision(tmp_path, newbie):
    study = sample_study(tmp_path)
    web_session(study, newbie)
    cache.clear()
    before = figure_fingerprint(study=study)
    drawn = revision_figure_cached(study=study, name="ratings", fmt="svg")
    decide(newbie)
    assert figure_fingerprint(study=study) != before
    assert revision_figure_cached(study=study, name="ratings", fmt="svg") != drawn


@pytest.mark.django_db(transaction=True)
def test_a_session_finished_as_the_figure_is_read_is_not_drawn_once_deleted(
    tmp_path, newbie, monkeypatch
):
    """The figure's key was read before its report's snapshot: a session finished between the
    two was in the figure stored under the key of the turns without it, and deleted again (in
    the admin) the turns had that key once more: the figure with the deleted session was served
    for an hour. The figure of the turns read with its key is stored under it."""
    from evaluation.revision import figures

    cache.clear()  # transactional tests reuse ids: another test's figure could have this key
    study = sample_study(tmp_path)
    decide(newbie)
    without = figures.render_revision_figure(revision_report_build(study=study), "ratings", "svg")
    build, finished = figures.revision_report_build, []

    def finished_first(**kwargs):
        if not finished:  # newbie's request, on a connection of its own
            in_thread(lambda: web_session(study, newbie), finished).join(30)
        return build(**kwargs)

    monkeypatch.setattr(figures, "revision_report_build", finished_first)
    assert revision_figure_cached(study=study, name="ratings", fmt="svg") == without
    monkeypatch.setattr(figures, "revision_report_build", build)
    assert revision_figure_cached(study=study, name="ratings", fmt="svg") != without
    finished[0].delete()
    assert revision_figure_cached(study=study, name="ratings", fmt="svg") == without
    cache.clear()


def test_the_figures_cache_key_moves_with_any_kind_stamp(tmp_path, newbie):
    """Expert to crowd worker lets no session in or out, but the key still follows the
    decision (kind_changed_at), as the InFoBench report's does."""
    study = sample_study(tmp_path)
    web_session(study, newbie)
    decide(newbie)
    before = figure_fingerprint(study=study)
    decide(newbie, AnnotatorKind.CROWD)
    assert figure_fingerprint(study=study) != before


def test_exports_leave_out_an_undecided_accounts_session_as_label_exports_do(tmp_path, newbie):
    study = sample_study(tmp_path)
    web_session(study, newbie)
    lines, rows = StringIO(), StringIO()
    assert sessions_export_jsonl(study=study, output=lines) == 3
    assert sessions_export_csv(study=study, output=rows) == 6
    assert "newbie" not in lines.getvalue() + rows.getvalue()
    # An import still recognises the session as one done in the app (no duplicate).
    assert [record["annotator"] for record in app_session_records(study=study)] == ["newbie"]
    decide(newbie)
    lines = StringIO()
    assert sessions_export_jsonl(study=study, output=lines) == 4
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [record.get("annotator") for record in records].count("newbie") == 1


def test_a_re_rating_by_an_undecided_account_is_out_of_the_human_row(tmp_path, newbie):
    """Two re-ratings of the sample's first turn (good): an expert's agrees, newbie's (not
    decided) says bad. The Human row reads 1 turn, accuracy 1.0, and the report names 1
    re-rating by 1 annotator left out; decided, newbie's counts too (2 pairs, 1 agreeing, of
    1 turn: docs/revision.md, `n` counts re-rated turns and the bootstrap resamples turns,
    so one turn gives no interval; the two re-ratings were resampled as two turns)."""
    study = sample_study(tmp_path)
    first = Turn.objects.order_by("id").first()
    assert first.rating == "good"
    now = timezone.now()
    for rater, rating in ((UserFactory(kind="expert"), "good"), (newbie, "bad")):
        Rerating.objects.create(
            turn=first, annotator=rater, rating=rating, status="done", created_at=now
        )

    def human(report):
        row = next(r for r in report["table5"]["rows"] if r["model"] == "Human")
        return row["n"], row["accuracy"], row["accuracy_ci_low"], row["accuracy_ci_high"]

    report = revision_report_build(study=study, n_resamples=10)
    assert human(report) == (1, 1.0, None, None)
    assert report["waiting_for_kind"] == {
        "sessions": 0,
        "annotators": 0,
        "reratings": 1,
        "raters": 1,
    }
    decide(newbie)
    report = revision_report_build(study=study, n_resamples=10)
    assert human(report) == (1, 0.5, None, None)
    assert report["waiting_for_kind"]["reratings"] == 0


def test_the_rating_judges_split_and_its_form_count_only_counted_turns(tmp_path, newbie):
    """The split is drawn from the report's turns (6 of the 7): the form's count and the
    prerequisite said 7, so a study could pass the check and then be refused its split."""
    study = sample_study(tmp_path)
    undecided = web_session(study, newbie).turns.get()
    assert rated_turns_count(study=study, task=JudgeTask.RATING) == 6
    split = rating_split(study=study, seed=0)
    assert sum(len(part) for part in split.values()) == 6
    assert undecided.pk not in {turn for part in split.values() for turn in part}
    # A classifier still labels every rated turn: one counted later has its label already.
    assert rated_turns_count(study=study, task=JudgeTask.INSTRUCTION_CATEGORY) == 7


def test_waiting_re_ratings_are_those_of_counted_turns(tmp_path, newbie):
    """docs/revision.md: `reratings` counts finished re-ratings *of counted turns* left out. A
    re-rating by an undecided account of a turn whose session is itself not counted was
    counted there too, so deciding the rater alone let nothing in while the note said it would."""
    study = sample_study(tmp_path)
    turn = web_session(study, newbie).turns.get()  # newbie's kind is not decided
    Rerating.objects.create(
        turn=turn,
        annotator=UserFactory(username="second", roles=[ANNOTATOR]),
        rating="good",
        status="done",
        created_at=timezone.now(),
    )
    waiting = revision_report_build(study=study, n_resamples=10)["waiting_for_kind"]
    assert (waiting["sessions"], waiting["reratings"], waiting["raters"]) == (1, 0, 0)


def test_an_own_re_rating_of_an_imported_turn_is_not_waiting_for_a_kind(tmp_path):
    """An undecided account whose login an imported session's line names re-rated that turn:
    the Human row never counts it (rerating_is_own), yet the note said it would once the
    rater's kind was decided."""
    from annotate.revision.counting import imported_annotator

    study = sample_study(tmp_path)
    turn = (
        Turn.objects.filter(session__study=study, session__annotator__isnull=True)
        .exclude(rating="")
        .first()
    )
    session = turn.session
    session.extra = {**(session.extra or {}), "annotator": "alice"}
    session.save(update_fields=["extra"])
    rater = UserFactory(username=imported_annotator(session.extra), roles=[ANNOTATOR])
    Rerating.objects.create(
        turn=turn, annotator=rater, rating="good", status="done", created_at=timezone.now()
    )
    waiting = revision_report_build(study=study, n_resamples=10)["waiting_for_kind"]
    assert (waiting["reratings"], waiting["raters"]) == (0, 0)
    second = UserFactory(username="second-rater", roles=[ANNOTATOR])  # not the session's
    Rerating.objects.create(
        turn=turn, annotator=second, rating="bad", status="done", created_at=timezone.now()
    )
    waiting = revision_report_build(study=study, n_resamples=10)["waiting_for_kind"]
    assert (waiting["reratings"], waiting["raters"]) == (1, 1)


def block(user, admin):
    review.worker_block(annotator_id=user.annotator.pk, reason="copied answers", user=admin)


def test_a_blocked_accounts_session_leaves_table_2_until_it_is_unblocked(
    tmp_path, newbie, admin_user
):
    """newbie, counted as a crowd worker, adds llama's second session (1 good stylistic turn):
    2 sessions, 4 turns, 2 good of 4. Blocked, its work counts in no result, as a blocked
    worker's labels do: llama reads 1 session, 3 turns, 1 good of 3, and nothing waits for a
    kind. Unblocked, the session counts again."""
    study = sample_study(tmp_path)
    web_session(study, newbie)
    decide(newbie, AnnotatorKind.CROWD)
    assert llama(revision_report_build(study=study, n_resamples=10)) == (2, 4, 0.5)
    block(newbie, admin_user)
    report = revision_report_build(study=study, n_resamples=10)
    assert llama(report) == (1, 3, pytest.approx(1 / 3))
    assert report["turns"] == 6
    assert report["waiting_for_kind"]["sessions"] == 0
    assert sessions_export_jsonl(study=study, output=StringIO()) == 3
    review.worker_unblock(annotator_id=newbie.annotator.pk, user=admin_user)
    report = revision_report_build(study=study, n_resamples=10)
    assert llama(report) == (2, 4, 0.5)
    assert report["turns"] == 7


def test_a_blocked_raters_re_rating_leaves_table_5_until_it_is_unblocked(
    tmp_path, newbie, admin_user
):
    """The sample's first turn (good) re-rated good by an expert and bad by newbie, counted as
    a crowd worker: 2 pairs, 1 agreeing, accuracy 0.5. newbie blocked: the expert's alone,
    1.0, and the blocked re-rating is not said to wait for a kind. Unblocked: 0.5 again."""
    study = sample_study(tmp_path)
    first = Turn.objects.order_by("id").first()
    now = timezone.now()
    for rater, rating in ((UserFactory(kind="expert"), "good"), (newbie, "bad")):
        Rerating.objects.create(
            turn=first, annotator=rater, rating=rating, status="done", created_at=now
        )
    decide(newbie, AnnotatorKind.CROWD)

    def human_accuracy():
        report = revision_report_build(study=study, n_resamples=10)
        row = next(r for r in report["table5"]["rows"] if r["model"] == "Human")
        return row["accuracy"], report["waiting_for_kind"]["reratings"]

    assert human_accuracy() == (0.5, 0)
    block(newbie, admin_user)
    assert human_accuracy() == (1.0, 0)
    review.worker_unblock(annotator_id=newbie.annotator.pk, user=admin_user)
    assert human_accuracy() == (0.5, 0)


BLOCKED_NOTE = (
    "1 finished session by 1 annotator and 1 re-rating by 1 annotator whose account an admin "
    "blocked are left out of every table and figure; they count again once the account is "
    "unblocked."
)


def test_the_report_says_how_much_blocked_accounts_work_it_left_out(
    client, tmp_path, newbie, admin_user
):
    """A blocked account's session and re-rating left the tables without a word: the report
    read as if nobody had done them. The page and every file now say how many, by how many
    accounts, and once unblocked say nothing."""
    study = sample_study(tmp_path)
    web_session(study, newbie)
    Rerating.objects.create(
        turn=Turn.objects.order_by("id").first(), annotator=newbie, rating="bad",
        status="done", created_at=timezone.now(),
    )  # fmt: skip
    decide(newbie, AnnotatorKind.CROWD)  # a block is of a crowd worker
    block(newbie, admin_user)
    report = revision_report_build(study=study, n_resamples=10)
    assert report["blocked"] == {"sessions": 1, "annotators": 1, "reratings": 1, "raters": 1}
    assert report["waiting_for_kind"]["sessions"] == 0
    client.force_login(admin_user)
    page = client.get(reverse("revision-reports:report", args=[study.pk])).text
    assert f'id="blocked-work">{BLOCKED_NOTE}' in page
    files = {
        fmt: client.get(reverse("revision-reports:download", args=[study.pk, fmt])).text
        for fmt in ("json", "csv", "latex", "md")
    }
    assert json.loads(files["json"])["blocked"]["sessions"] == 1
    assert "# blocked\r\nsessions,annotators,reratings,raters\r\n1,1,1,1\r\n" in files["csv"]
    assert f"% {BLOCKED_NOTE}\n" in files["latex"]
    assert f"\n{BLOCKED_NOTE}\n" in files["md"]

    review.worker_unblock(annotator_id=newbie.annotator.pk, user=admin_user)
    page = client.get(reverse("revision-reports:report", args=[study.pk])).text
    assert 'id="blocked-work"' not in page
    md = client.get(reverse("revision-reports:download", args=[study.pk, "md"])).text
    assert "blocked" not in md
