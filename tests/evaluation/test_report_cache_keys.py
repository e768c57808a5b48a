"""A cached report is served only while what it was computed from is unchanged.

Each test reads a report through the cache (as the report page, its figures and the API do),
changes what the report reads through one of the app's ways of writing it, and reads again: the
number must be the new one. The labels here never change; what moves is what they are about
(their instruction's subset, their question's constraint types, their response's system).
"""

from __future__ import annotations

import pytest

from annotate.models import ConstraintType, Instruction, Question, Response, Subset, System
from annotate.selectors.identities import OPERATOR
from evaluation.services.reports import report_cached

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(superuser_client):
    return superuser_client


def _report(bench) -> dict:
    return report_cached(benchmark=bench, scope=OPERATOR)


def _dataset(bench, subset: str) -> dict:
    return next(row for row in _report(bench)["dataset"] if row["subset"] == subset)


def _systems(bench) -> set[str]:
    return {row["system"] for row in _report(bench)["leaderboard"]}


def _admin_form(admin_client, url: str) -> dict:
    """The change page's form as the browser would send it unchanged."""
    form = admin_client.get(url).context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is not None:
            data[name] = getattr(value, "pk", value)
    return data


def test_an_instruction_moved_to_another_subset_in_the_admin_is_counted_there(admin_client, bench):
    """Table 2's counts per subset follow an instruction's subset corrected on its change page
    (with its questions inline, sent back unchanged)."""
    assert _dataset(bench, "easy")["instructions"] == 1
    easy = Instruction.objects.get(benchmark=bench, subset=Subset.EASY)
    url = f"/admin/annotate/instruction/{easy.pk}/change/"
    form = _admin_form(admin_client, url)
    questions = list(easy.questions.order_by("position"))
    form.update(
        {
            "subset": Subset.HARD,
            "questions-TOTAL_FORMS": len(questions),
            "questions-INITIAL_FORMS": len(questions),
            "questions-MIN_NUM_FORMS": 0,
            "questions-MAX_NUM_FORMS": 1000,
        }
    )
    for i, question in enumerate(questions):
        form.update(
            {
                f"questions-{i}-id": question.pk,
                f"questions-{i}-instruction": easy.pk,
                f"questions-{i}-position": question.position,
                f"questions-{i}-text": question.text,
                f"questions-{i}-constraint_mask": question.constraint_mask,
            }
        )
    assert admin_client.post(url, form).status_code == 302
    assert Instruction.objects.get(pk=easy.pk).subset == Subset.HARD

    assert _dataset(bench, "easy")["instructions"] == 0
    assert _dataset(bench, "hard")["instructions"] == 2


def test_a_questions_constraint_types_corrected_in_the_admin_are_counted(admin_client, bench):
    """Table 6 counts questions per constraint type: a type corrected on the question's change
    page is counted under the new type."""

    def style_questions() -> int:
        rows = _report(bench)["constraint_types"]
        return next(row["style"] for row in rows if row["subset"] == "overall")

    assert style_questions() == 0
    question = Question.objects.filter(instruction__benchmark=bench).order_by("id").first()
    url = f"/admin/annotate/question/{question.pk}/change/"
    form = {**_admin_form(admin_client, url), "constraint_mask": ConstraintType.STYLE}
    assert admin_client.post(url, form).status_code == 302

    assert style_questions() == 1


def test_a_response_given_to_another_system_in_the_admin_is_reported_under_it(admin_client, bench):
    response = Response.objects.filter(system__name="alpha").order_by("id").first()
    gamma = System.objects.create(name="gamma")
    assert _systems(bench) == {"alpha", "beta"}
    url = f"/admin/annotate/response/{response.pk}/change/"
    form = {**_admin_form(admin_client, url), "system": gamma.pk}
    assert admin_client.post(url, form).status_code == 302

    assert _systems(bench) == {"alpha", "beta", "gamma"}


def test_a_system_renamed_in_the_admin_is_reported_by_its_new_name(admin_client, bench):
    alpha = System.objects.get(name="alpha")
    assert _systems(bench) == {"alpha", "beta"}
    url = f"/admin/annotate/system/{alpha.pk}/change/"
    form = {**_admin_form(admin_client, url), "name": "alpha-v2"}
    assert admin_client.post(url, form).status_code == 302

    assert _systems(bench) == {"alpha-v2", "beta"}


def test_a_response_a_generation_run_replaced_is_reported_under_the_retired_system(bench):
    """A generation run that replaces a response moves it, with its labels, to the system's
    retired version (a queryset update of the response): the labels are counted there."""
    from annotate.engine.models import EngineRun
    from annotate.engine.services.generation import generation_response_retire
    from tests.annotate.engine.conftest import make_endpoint

    assert _systems(bench) == {"alpha", "beta"}
    run = EngineRun.objects.create(kind="generation", endpoint=make_endpoint(""), params={})
    for response in Response.objects.filter(instruction__benchmark=bench, system__name="alpha"):
        generation_response_retire(response=response, run=run)

    assert _systems(bench) == {f"alpha (replaced by run {run.pk})", "beta"}


def test_an_instructions_domain_changed_by_an_update_is_counted(bench):
    """Any write counts, a queryset update (a shell, a script) as well as a page's save."""
    assert _dataset(bench, "easy")["domains"] == 1
    Instruction.objects.filter(benchmark=bench, subset=Subset.EASY).update(category="")

    assert _dataset(bench, "easy")["domains"] == 0


def test_an_annotator_renamed_in_the_admin_changes_whose_ratings_agreement_keeps(
    admin_client, bench
):
    """Agreement keeps an item's first n raters in name order (n: the most common number of
    raters): a fourth expert on i1 named last is left out there; renamed to come first, it is
    kept and expert-3 is left out, so the kappa read through the cache is the new one."""
    from annotate.models import AnnotatorKind
    from evaluation.services.reports import report_build
    from tests.factories import AnnotatorFactory, DirectScoreFactory

    def kappa(report) -> float:
        rows = report["agreement"]
        return next(
            r["fleiss_kappa"]
            for r in rows
            if (r["protocol"], r["group"], r["subset"]) == ("ds", "expert", "overall")
        )

    fourth = AnnotatorFactory(name="expert-4", kind=AnnotatorKind.EXPERT)
    easy = Instruction.objects.get(benchmark=bench, subset=Subset.EASY)
    for system, score in (("alpha", 5), ("beta", 1)):  # A better; expert-3 said B better
        response = Response.objects.get(instruction=easy, system__name=system)
        DirectScoreFactory(response=response, annotator=fourth, score=score)
    before = kappa(_report(bench))
    url = f"/admin/annotate/annotator/{fourth.pk}/change/"
    form = {**_admin_form(admin_client, url), "name": "expert-0"}
    assert admin_client.post(url, form).status_code == 302

    fresh = kappa(report_build(scope=OPERATOR, benchmark=bench, n_resamples=10))
    assert fresh != before
    assert kappa(_report(bench)) == fresh


# --- Coordinated changes that sums of ids, or the latest stamp, did not see -------------------


def _yes_of(report, source: str) -> dict[str, int]:
    return {
        row["system"]: row["yes"]
        for row in report["leaderboard"]
        if row["source"] == source and row["subset"] == "overall"
    }


def _sums_of_powers(queryset) -> tuple:
    """What the key summarised a set of assignments by before (count, sum and sum of squares of
    the ids): the swaps below keep all three."""
    from django.db.models import Count, F, Sum

    return tuple(
        queryset.aggregate(n=Count("id"), ids=Sum("id"), squares=Sum(F("id") * F("id"))).values()
    )


def _work_said(said_yes, count: int, *, ids=None):
    """One question, one system: `count` submitted assignments of experts, those numbered in
    `said_yes` saying YES and counted, the others NO and left out (no slot yet), with the given
    `ids` (else the factory's, in a row). Return the benchmark, the system and the ids."""
    from django.utils import timezone

    from annotate.models import AnnotatorKind, AssignmentStatus, Label
    from tests.factories import (
        AnnotatorFactory,
        AssignmentFactory,
        TaskFactory,
        benchmark_with_responses,
    )

    benchmark, (system,) = benchmark_with_responses(instructions=1, systems=1, questions=1)
    question = Question.objects.get(instruction__benchmark=benchmark)
    response = Response.objects.get(instruction__benchmark=benchmark)
    task = TaskFactory(batch__project__benchmark=benchmark, instruction=question.instruction)
    made = []
    for n in range(count):
        annotator = AnnotatorFactory(name=f"swap-{n}", kind=AnnotatorKind.EXPERT)
        assignment = AssignmentFactory(
            **({"pk": ids[n]} if ids else {}),
            task=task,
            annotator=annotator,
            status=AssignmentStatus.SUBMITTED,
            submitted_at=timezone.now(),
            is_late=n not in said_yes,  # the left-out work holds no slot yet
        )
        Label.objects.create(
            question=question,
            response=response,
            annotator=annotator,
            assignment=assignment,
            value=1 if n in said_yes else 0,
        )
        made.append(assignment.pk)
    return benchmark, system, made


def _swapped(said_yes, said_no, assignments) -> None:
    """The YES work rejected, the left-out NO work given slots."""
    from annotate.models import Assignment, AssignmentStatus

    Assignment.objects.filter(pk__in=[assignments[n] for n in said_yes]).update(
        status=AssignmentStatus.REJECTED
    )
    Assignment.objects.filter(pk__in=[assignments[n] for n in said_no]).update(is_late=False)


def test_three_rejections_and_three_restored_submissions_are_reported_at_once(db):
    """Between two page loads three submissions are rejected (1st, 5th and 6th by id) and the
    left-out work of three others (2nd, 3rd, 7th) takes their slots: as many assignments count,
    their ids' sum and sum of squares unchanged (1+5+6 = 2+3+7, 1+25+36 = 4+9+49). The first
    said YES, the others NO: the report read through the cache must say NO."""
    from annotate.models import Annotator
    from annotate.selectors.results import counted_assignments
    from evaluation.services.reports import EXPERT_MAJORITY

    said_yes, said_no = (0, 4, 5), (1, 2, 6)
    benchmark, system, assignments = _work_said(said_yes, 7)
    assert assignments == list(range(assignments[0], assignments[0] + 7))  # ids in a row
    counted = counted_assignments().filter(task__batch__project__benchmark=benchmark)
    old_summary = _sums_of_powers(counted)
    assert _yes_of(_report(benchmark), EXPERT_MAJORITY) == {system.name: 1}

    _swapped(said_yes, said_no, assignments)

    assert set(counted.values_list("annotator__name", flat=True)) == {"swap-1", "swap-2", "swap-6"}
    assert _sums_of_powers(counted) == old_summary  # what the old key read did not move
    assert Annotator.objects.filter(name__startswith="swap-").count() == 7
    assert _yes_of(_report(benchmark), EXPERT_MAJORITY) == {system.name: 0}


def test_two_sets_whose_first_hashes_collide_keep_different_fingerprints(db):
    """{5, 1622} and {10, 387} have the same sum of the first lane's hashes: a second lane that
    multiplied that hash again summed the same too (its sum is c times the first's modulo
    2**32), so the key had about 33 bits, not 64. Each lane mixes the ids on its own."""
    from annotate.models import Annotator
    from annotate.selectors.fingerprints import ids_fingerprint
    from tests.factories import AnnotatorFactory

    for pk in (5, 10, 387, 1622):
        AnnotatorFactory(pk=pk, name=f"lane-{pk}")
    one = ids_fingerprint(Annotator.objects.filter(pk__in=[5, 1622]))
    two = ids_fingerprint(Annotator.objects.filter(pk__in=[10, 387]))
    assert one[1] == two[1]  # the first lane alone collides (so the test keeps its meaning)
    assert one != two


def _lanes_of(ids) -> tuple[int, int, int]:
    """The fingerprint worked out in Python from its documented mix (fingerprints._LANES)."""
    from annotate.selectors.fingerprints import _LANES

    sums = []
    for seed, (s1, s2, s3), (m1, m2) in _LANES:
        total = 0
        for pk in ids:
            x = (pk & 0xFFFFFFFF) ^ seed
            a = ((x ^ (x >> s1)) * m1) & 0xFFFFFFFF
            b = ((a ^ (a >> s2)) * m2) & 0xFFFFFFFF
            total += b ^ (b >> s3)
        sums.append(total)
    return (len(ids), *sums)


def test_the_fingerprint_of_ids_far_beyond_32_bits_is_the_mix_without_overflow(db):
    """Ids are 64-bit: every step of the mix stays inside a signed 64-bit integer on both
    databases (PostgreSQL raises on overflow, SQLite turns to a float), and ids 2**32 apart
    share a hash, as documented."""
    from annotate.models import Annotator
    from annotate.selectors.fingerprints import ids_fingerprint
    from tests.factories import AnnotatorFactory

    big = [1, 2**31 - 1, 2**31, 2**32 - 1, 2**32 + 1, 2**40 + 3, 2**62 + 11, 2**63 - 1]
    for pk in big:
        AnnotatorFactory(pk=pk, name=f"big-{pk}")
    assert ids_fingerprint(Annotator.objects.filter(pk__in=big)) == _lanes_of(big)
    assert ids_fingerprint(Annotator.objects.filter(pk=1)) == ids_fingerprint(
        Annotator.objects.filter(pk=2**32 + 1)
    )


def test_two_rejections_and_two_restored_submissions_whose_first_hashes_collide(db):
    """Assignments 5 and 1622 said YES and count, 10 and 387 said NO and were left out; the
    first two are rejected and the other two take their slots: the report read through the
    cache must say NO (it said YES while both lanes of the key collided)."""
    from evaluation.services.reports import EXPERT_MAJORITY

    said_yes, said_no, ids = (0, 1), (2, 3), {0: 5, 1: 1622, 2: 10, 3: 387}
    benchmark, system, assignments = _work_said(said_yes, 4, ids=ids)
    assert _yes_of(_report(benchmark), EXPERT_MAJORITY) == {system.name: 1}

    _swapped(said_yes, said_no, assignments)

    assert _yes_of(_report(benchmark), EXPERT_MAJORITY) == {system.name: 0}


def test_a_kind_decided_on_a_host_whose_clock_is_behind_is_reported(bench):
    """A kind is decided on a host whose clock is fast, then another on one whose clock is an
    hour behind it: the second stamp is older than the first, so the latest stamp does not
    move; the report read through the cache must still follow the second decision."""
    from datetime import timedelta

    from django.utils import timezone

    from annotate.models import Annotator, AnnotatorKind
    from annotate.services.annotators import annotator_kind_set
    from evaluation.services.reports import report_build
    from tests.factories import AnnotatorFactory

    now = timezone.now()
    newcomer = AnnotatorFactory(name="newcomer", kind=AnnotatorKind.UNDECIDED)
    annotator_kind_set(annotator=newcomer, kind=AnnotatorKind.CROWD, now=now + timedelta(hours=1))
    before = _report(bench)
    expert = Annotator.objects.get(name="expert-1")
    annotator_kind_set(annotator=expert, kind=AnnotatorKind.CROWD, now=now)
    latest = max(Annotator.objects.exclude(kind_changed_at=None).values_list("kind_changed_at"))
    assert latest == (newcomer.kind_changed_at,)  # the latest stamp did not move

    fresh = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)["leaderboard"]
    assert fresh != before["leaderboard"]
    assert _report(bench)["leaderboard"] == fresh


def test_label_corrections_stamped_by_a_clock_behind_the_latest_are_reported(admin_client, db):
    """Three labels in a row corrected in the admin, NO to YES, UNKNOWN to NO, NO to YES: the
    values' sum and their sum weighted by id do not move (+1 - 2 + 1; a - 2(a+1) + (a+2)), and
    an earlier correction on a host whose clock is an hour fast holds the latest stamp. The
    report read through the cache must count the two new YES."""
    from datetime import timedelta

    from django.utils import timezone

    from annotate.models import AnnotatorKind, Label
    from evaluation.services.reports import EXPERT_MAJORITY
    from tests.factories import AnnotatorFactory, LabelFactory, benchmark_with_responses

    benchmark, (system,) = benchmark_with_responses(instructions=1, systems=1, questions=4)
    response = Response.objects.get(instruction__benchmark=benchmark)
    expert = AnnotatorFactory(name="corrector", kind=AnnotatorKind.EXPERT)
    questions = list(Question.objects.filter(instruction__benchmark=benchmark).order_by("position"))
    labels = [
        LabelFactory(question=q, response=response, annotator=expert, value=value)
        for q, value in zip(questions, (0, 2, 0, 1), strict=True)
    ]
    assert [label.pk for label in labels[:3]] == list(range(labels[0].pk, labels[0].pk + 3))
    fast_host = timezone.now() + timedelta(hours=1)
    Label.objects.filter(pk=labels[3].pk).update(changed_at=fast_host)
    assert _yes_of(_report(benchmark), EXPERT_MAJORITY) == {system.name: 1}

    for label, value in zip(labels[:3], (1, 0, 1), strict=True):
        url = f"/admin/annotate/label/{label.pk}/change/"
        form = {**_admin_form(admin_client, url), "value": value}
        assert admin_client.post(url, form).status_code == 302
    assert list(
        Label.objects.filter(pk__in=[x.pk for x in labels])
        .order_by("pk")
        .values_list("value", flat=True)
    ) == [1, 0, 1, 1]
    assert max(Label.objects.values_list("changed_at", flat=True)) == fast_host

    assert _yes_of(_report(benchmark), EXPERT_MAJORITY) == {system.name: 3}
