from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from annotate.errors import ConflictError, NotFoundError, ProjectSetupError, SubmissionError
from annotate.models import AnnotatorKind
from annotate.revision.models import Rerating, RevisionSession, Study, Turn
from annotate.revision.selectors import rerate_candidates_count
from annotate.revision.services.exports import sessions_export_jsonl
from annotate.revision.services.imports import sessions_import
from annotate.revision.services.reratings import rerating_submit, reratings_sample
from annotate.roles import ANNOTATOR
from annotate.services.annotators import annotator_kind_set
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(study):
    """Two finished sessions of two annotators, two rated turns each."""
    users = [UserFactory(username=name, kind="expert") for name in ("owner-a", "owner-b")]
    now = timezone.now()
    for user, question, system in zip(
        users, study.questions.all(), study.systems.all(), strict=True
    ):
        session = RevisionSession.objects.create(
            study=study,
            question=question,
            system=system,
            annotator=user,
            status="finished",
            initial_answer="a0",
            created_at=now,
        )
        for position in (1, 2):
            Turn.objects.create(
                session=session,
                position=position,
                instruction="i",
                answer="a",
                rating="good",
                comment="c",
            )
    return users


def test_sample_never_goes_to_the_sessions_own_annotator(study, finished):
    now = timezone.now()
    reratings = reratings_sample(study=study, annotators=finished, size=4, seed=7, now=now)
    assert len(reratings) == 4
    for rerating in reratings:
        assert rerating.annotator_id != rerating.turn.session.annotator_id
    with pytest.raises(ProjectSetupError, match="only 0 finished turns"):
        reratings_sample(study=study, annotators=finished, size=1, seed=7, now=now)


def test_sample_is_seeded(study, finished):
    def sample():
        chosen = reratings_sample(
            study=study, annotators=finished, size=2, seed=3, now=timezone.now()
        )
        return [r.turn_id for r in chosen]

    first = sample()
    Rerating.objects.all().delete()
    assert sample() == first


def test_one_annotator_gets_only_turns_of_other_sessions(study, finished):
    """The sample used to be drawn from every turn left and refused whole when it held one of
    the only chosen annotator's own: it is drawn from the others' turns, and refused only when
    fewer of those are left than asked, naming both counts."""
    owner_a, owner_b = finished
    with pytest.raises(ProjectSetupError) as refused:
        reratings_sample(study=study, annotators=[owner_a], size=3, seed=1, now=timezone.now())
    assert str(refused.value) == (
        "only 2 of the 4 finished turns left may go to owner-a, the only annotator chosen (the "
        "other 2 are of owner-a's own sessions), not 3: ask for 2 or fewer, or choose another "
        "annotator too"
    )
    assert not Rerating.objects.exists()
    sent = reratings_sample(study=study, annotators=[owner_a], size=2, seed=1, now=timezone.now())
    assert {(r.annotator, r.turn.session.annotator) for r in sent} == {(owner_a, owner_b)}


def test_submit_needs_a_rating_and_comment_and_only_the_assignee(study, finished):
    now = timezone.now()
    rerating = reratings_sample(study=study, annotators=finished, size=1, seed=0, now=now)[0]
    with pytest.raises(NotFoundError):
        rerating_submit(
            rerating_id=rerating.pk,
            user=rerating.turn.session.annotator,
            rating="good",
            comment="x",
            now=now,
        )
    with pytest.raises(SubmissionError):
        rerating_submit(
            rerating_id=rerating.pk, user=rerating.annotator, rating="good", comment="", now=now
        )
    done = rerating_submit(
        rerating_id=rerating.pk, user=rerating.annotator, rating="bad", comment="missed it", now=now
    )
    assert (done.status, done.rating) == ("done", "bad")
    with pytest.raises(ConflictError):
        rerating_submit(
            rerating_id=rerating.pk, user=rerating.annotator, rating="bad", comment="again", now=now
        )


def test_a_rerating_takes_its_rating_word_in_any_case(study, finished):
    """The imports take "GOOD" and " Bad "; the re-rating refused "Good" (a script, an API
    client) with a 400."""
    now = timezone.now()
    rerating = reratings_sample(study=study, annotators=finished, size=1, seed=0, now=now)[0]
    done = rerating_submit(
        rerating_id=rerating.pk, user=rerating.annotator, rating=" Bad ", comment="no", now=now
    )
    assert Rerating.objects.get(pk=done.pk).rating == "bad"


def test_a_turn_of_an_imported_session_never_goes_to_the_annotator_its_line_names(
    study, finished, tmp_path
):
    """Paper §5: annotators never re-rate their own interactions. The app's export names who
    did each session (`annotator`); imported into another study, a session has no annotator in
    the app, and its turns were sent back to the very annotator who did it."""
    exported = tmp_path / "sessions.jsonl"
    with exported.open("w") as output:
        sessions_export_jsonl(study=study, output=output)
    sessions_import(path=str(exported), study_name="copy")
    copy = Study.objects.get(name="copy")
    now = timezone.now()
    with pytest.raises(ProjectSetupError, match="the other 2 are of owner-a's own sessions"):
        reratings_sample(study=copy, annotators=finished[:1], size=3, seed=1, now=now)
    assert not Rerating.objects.exists()
    alone = reratings_sample(study=copy, annotators=finished[:1], size=2, seed=1, now=now)
    assert {r.turn.session.extra["annotator"] for r in alone} == {"owner-b"}
    Rerating.objects.all().delete()
    third = UserFactory(username="third", kind="expert")
    sent = reratings_sample(study=copy, annotators=[*finished, third], size=4, seed=1, now=now)
    for rerating in sent:
        assert rerating.annotator.username != rerating.turn.session.extra["annotator"]


def test_a_turn_re_rated_only_by_its_own_annotator_still_goes_to_a_second_person(study, finished):
    """A self re-rating (sent under an older rule) counts in no agreement (the Human row
    leaves it out), yet the sampler skipped every turn with any re-rating, so such a turn never
    reached a second person. A re-rating by another person still takes its turn out."""
    owner_a, owner_b = finished
    own_turn, other_turn = Turn.objects.filter(session__annotator=owner_a).order_by("id")
    Rerating.objects.create(turn=own_turn, annotator=owner_a, created_at=timezone.now())
    Rerating.objects.create(turn=other_turn, annotator=owner_b, created_at=timezone.now())
    assert rerate_candidates_count(study=study) == 3

    sent = reratings_sample(study=study, annotators=finished, size=3, seed=0, now=timezone.now())
    assert own_turn.pk in {rerating.turn_id for rerating in sent}
    assert Rerating.objects.get(turn=own_turn, annotator=owner_b)  # a second person has it now
    assert rerate_candidates_count(study=study) == 0


def test_a_self_re_rating_of_an_imported_session_does_not_take_its_turn_out(
    study, finished, tmp_path
):
    """An imported session has no annotator in the app: the login its line names is who did it,
    and their re-rating of it is theirs, as the Human row counts it."""
    exported = tmp_path / "sessions.jsonl"
    with exported.open("w") as output:
        sessions_export_jsonl(study=study, output=output)
    sessions_import(path=str(exported), study_name="copy")
    copy = Study.objects.get(name="copy")
    owner_a = finished[0]
    turn = Turn.objects.filter(session__study=copy, session__extra__annotator="owner-a").first()
    Rerating.objects.create(turn=turn, annotator=owner_a, created_at=timezone.now())
    assert rerate_candidates_count(study=copy) == 4
    sent = reratings_sample(study=copy, annotators=finished, size=4, seed=0, now=timezone.now())
    assert {rerating.turn_id for rerating in sent} >= {turn.pk}
    assert all(r.annotator.username != r.turn.session.extra["annotator"] for r in sent)


def test_sample_never_draws_turns_of_an_account_whose_kind_is_not_decided(study, finished):
    """owner-b's kind is taken back to not decided: of the four rated turns only owner-a's two
    are drawn, a third is refused, and once owner-b is decided again their two are left."""
    owner_a, owner_b = finished
    now = timezone.now()
    annotator_kind_set(annotator=owner_b.annotator, kind=AnnotatorKind.UNDECIDED, now=now)
    rater = UserFactory(username="rater", roles=[ANNOTATOR])
    assert rerate_candidates_count(study=study) == 2
    with pytest.raises(ProjectSetupError, match="only 2 finished turns"):
        reratings_sample(study=study, annotators=[rater], size=3, seed=7, now=now)
    out = StringIO()
    call_command(
        "revision_rerate", "--study", study.name, "--size", "2", "--annotator", "rater",
        stdout=out,
    )  # fmt: skip
    owners = Rerating.objects.values_list("turn__session__annotator__username", flat=True)
    assert sorted(owners) == ["owner-a", "owner-a"]
    annotator_kind_set(annotator=owner_b.annotator, kind=AnnotatorKind.CROWD, now=now)
    assert rerate_candidates_count(study=study) == 2
    chosen = reratings_sample(study=study, annotators=[rater], size=2, seed=7, now=now)
    assert {r.turn.session.annotator_id for r in chosen} == {owner_b.pk}
