"""report_build on the hand-computed benchmark of conftest.py (its docstring shows the labels)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.crowd.models import Hit, HitStatus, PlatformAssignment, Publication
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    AssignmentStatus,
    Label,
    LabelValue,
    ProjectAnnotatorKind,
    Subset,
)
from annotate.selectors.identities import OPERATOR
from evaluation.conventions import UNKNOWN_CONVENTIONS
from evaluation.errors import ReportError
from evaluation.figures import render_figure
from evaluation.selectors.report_costs import source_costs
from evaluation.services.reports import report_build
from tests.annotate.crowd.conftest import fake_publication
from tests.factories import (
    AnnotatorFactory,
    AssignmentFactory,
    BatchFactory,
    BenchmarkFactory,
    InstructionFactory,
    LabelFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
    TaskFactory,
)

pytestmark = pytest.mark.django_db
SVG = "{http://www.w3.org/2000/svg}"


def _rows(report, table, **where):
    return [r for r in report[table] if all(r[k] == v for k, v in where.items())]


def _one(report, table, **where):
    rows = _rows(report, table, **where)
    assert len(rows) == 1, (table, where, rows)
    return rows[0]


def test_expert_majority_drfr_excludes_the_tie_and_unknown(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    drfr = {
        (r["system"], r["subset"]): (r["yes"], r["questions"])
        for r in _rows(report, "leaderboard", source="expert-majority")
    }
    # i1 alpha: Y and a tie (not counted); i1 beta: Y N; i2 alpha: YYY; i2 beta: NNN.
    assert drfr == {
        ("alpha", "easy"): (1, 1),
        ("beta", "easy"): (1, 2),
        ("alpha", "hard"): (3, 3),
        ("beta", "hard"): (0, 3),
        ("alpha", "overall"): (4, 4),
        ("beta", "overall"): (1, 5),
    }
    assert _one(report, "votes", source="expert-majority") == {
        "source": "expert-majority",
        "items": 10,
        "ties": 1,
        "no_votes": 0,
    }


def test_the_three_unknown_conventions_on_a_conversation_stopped_early(bench):
    # The judge never answered i2 beta's third question (the official script stops after an
    # unparseable answer): i2 beta is N, U, missing; i1 beta YY.
    Label.objects.filter(
        annotator__name="judge", response__system__name="beta", question__position=3
    ).delete()
    counts = {}
    for unknown in ("exclude", "no", "official"):
        report = report_build(scope=OPERATOR, benchmark=bench, unknown=unknown, n_resamples=10)
        row = _one(report, "leaderboard", source="judge", system="beta", subset="overall")
        counts[unknown] = (row["yes"], row["questions"])
        assert report["unknown"] == unknown
        assert report["unknown_convention"] == UNKNOWN_CONVENTIONS[unknown]
    # exclude (appendix A.3): Y Y N counted; no (equation 1): all 5 questions of i1 and i2;
    # official (evaluation.py's ratio): the 4 answered entries, UNKNOWN as NO.
    assert counts == {"exclude": (2, 3), "no": (2, 5), "official": (2, 4)}


def test_a_source_that_answered_only_unknown_is_n_a_where_unknown_is_left_out(bench):
    """The DRFR table's caption said an n/a cell's source "answered none" of the model's
    questions: the judge answered every question of beta in the Easy Set, all UNKNOWN, and the
    default convention (exclude) counts none of them. The official one counts them as NO."""
    from evaluation.report_formats import report_latex

    Label.objects.filter(
        annotator__name="judge",
        response__system__name="beta",
        response__instruction__subset=Subset.EASY,
    ).update(value=LabelValue.UNKNOWN)
    report = report_build(scope=OPERATOR, benchmark=bench, unknown="exclude", n_resamples=10)
    assert not _rows(report, "leaderboard", source="judge", system="beta", subset="easy")
    latex = report_latex(report)
    assert " & beta & n/a & " in latex  # the judge's row: every other source counted beta
    assert latex.count(
        "n/a: the DRFR counted none of the source's answers to the model's questions in that "
        "set (it answered none, or only UNKNOWN where UNKNOWN is left out)."
    ) == 1  # fmt: skip
    official = report_build(scope=OPERATOR, benchmark=bench, unknown="official", n_resamples=10)
    row = _one(official, "leaderboard", source="judge", system="beta", subset="easy")
    assert row["drfr"] == 0.0 and row["questions"] > 0


def test_official_convention_in_kappa_counts_every_answered_label(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, unknown="official", n_resamples=10)
    # Every expert label is present: the official ratio equals "no" here, and expert-3's
    # i1 alpha UNKNOWN counts as NO (Y, NO → 1/2, as the "no" convention).
    official = _one(report, "agreement", protocol="drfr", group="expert", subset="easy")
    as_no = _one(
        report_build(scope=OPERATOR, benchmark=bench, unknown="no", n_resamples=10),
        "agreement",
        protocol="drfr",
        group="expert",
        subset="easy",
    )
    assert official["fleiss_kappa"] == as_no["fleiss_kappa"]
    assert official["p_bar"] == as_no["p_bar"]


def test_unknown_counted_as_no_when_asked(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, unknown="no", n_resamples=200)
    majority = _one(report, "leaderboard", source="expert-majority", system="alpha", subset="easy")
    assert (majority["yes"], majority["questions"]) == (1, 2)
    judge = _one(report, "leaderboard", source="judge", system="beta", subset="overall")
    assert (judge["yes"], judge["questions"]) == (2, 5)
    assert report["unknown"] == "no"


def test_leaderboard_has_each_expert_the_majorities_and_the_judge_with_cis(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    sources = {r["source"] for r in report["leaderboard"]}
    assert sources == {
        "expert-1",
        "expert-2",
        "expert-3",
        "expert-majority",
        "crowd-majority",
        "judge",
    }
    judge = _one(report, "leaderboard", source="judge", system="alpha", subset="overall")
    assert judge["drfr"] == pytest.approx(3 / 5)
    for row in _rows(report, "leaderboard", subset="overall"):
        # The crowd labelled one instruction, and a DRFR of 0 or 1 is the same in every
        # resample: no CI (test_a_subset_of_one_instruction_has_no_interval_not_a_point).
        if row["source"] != "crowd-majority" and row["drfr"] not in (0.0, 1.0):
            assert row["ci_low"] <= row["drfr"] + 1e-12 <= row["ci_high"] + 2e-12
    crowd = _rows(report, "leaderboard", source="crowd-majority")
    assert {(r["system"], r["subset"], r["drfr"]) for r in crowd} == {
        ("alpha", "easy", 1.0),
        ("beta", "easy", 0.0),
        ("alpha", "overall", 1.0),
        ("beta", "overall", 0.0),
    }


def test_drfr_kappa_is_undefined_when_every_expert_always_agrees(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    # Every expert ranks alpha above beta on both instructions: one category, P_e = 1.
    row = _one(report, "agreement", protocol="drfr", group="expert", subset="overall")
    assert row["fleiss_kappa"] is None
    assert row["p_e"] == pytest.approx(1.0)
    assert "P_e" in row["undefined_reason"]
    assert (row["items"], row["annotators"], row["dropped"]) == (2, 3, 0)


def test_direct_score_kappa_matches_the_hand_computation(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    row = _one(report, "agreement", protocol="ds", group="expert", subset="overall")
    # Items: i1 counts (A, tie, B) = (1, 1, 1); i2 = (2, 1, 0). P̄ = 1/6, P_e = 7/18.
    assert row["p_bar"] == pytest.approx(1 / 6)
    assert row["p_e"] == pytest.approx(7 / 18)
    assert row["fleiss_kappa"] == pytest.approx(-4 / 11)
    assert row["raw_agreement"] == 0
    easy = _one(report, "agreement", protocol="ds", group="expert", subset="easy")
    assert easy["items"] == 1


def test_crowd_kappa_pools_the_workers_of_each_task(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    row = _one(report, "agreement", protocol="drfr", group="crowd", subset="easy")
    # crowd-1 and crowd-3: alpha better; crowd-2: a tie. Counts (2, 1, 0): κ = -0.5.
    assert row["fleiss_kappa"] == pytest.approx(-0.5)
    assert row["annotators"] == 3


def test_sources_against_the_expert_majority(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    assert report["acc_unknown"] == "exclude"
    judge = _one(report, "sources", source="judge", subset="overall")
    # 9 gold items with a majority; the judge's UNKNOWN (i2 beta Q2) is not counted
    # (appendix A.3): 8 compared, 6 right.
    assert (judge["compared"], judge["acc"]) == (8, pytest.approx(6 / 8))
    # i1: judge says beta better, gold says alpha better (PLD 2); i2: both alpha (PLD 0).
    assert (judge["pairs"], judge["pld0"], judge["pld1"], judge["pld2"]) == (2, 50.0, 0.0, 50.0)
    assert judge["wpld"] == pytest.approx(1.0)
    gold = _one(report, "sources", source="expert-majority", subset="overall")
    assert (gold["acc"], gold["pld0"], gold["wpld"]) == (1.0, 100.0, 0.0)
    crowd = _one(report, "sources", source="crowd-majority", subset="easy")
    assert (crowd["compared"], crowd["acc"]) == (3, pytest.approx(2 / 3))
    assert {r["gold"] for r in _rows(report, "sources", subset="overall")} == {
        "expert-majority",
        "other-experts",
    }
    assert (judge["gold"], gold["gold"], crowd["gold"]) == ("expert-majority",) * 3


def test_an_expert_is_judged_against_the_other_experts(bench):
    """Each expert's ACC is against the majority of the two others (conftest's labels), with
    ties between the two skipped; against a majority holding their own vote expert-1 would
    have 8 of 9 right.

    expert-1 vs (expert-2, expert-3): i1 alpha Y=Y, Y≠N (N, U); i1 beta tie, N=N; i2 alpha
    Y=Y, Y=Y, tie; i2 beta tie, N=N, Y≠N: 5 of 7. expert-2 vs (1, 3): i1 alpha Y=Y, N≠Y
    (Y, U); i1 beta N≠Y, N=N; i2 alpha Y=Y, Y=Y, N≠Y; i2 beta tie, N=N, tie: 5 of 8.
    expert-3 vs (1, 2): i1 alpha Y=Y, its UNKNOWN not counted; i1 beta tie, N=N; i2 alpha
    Y=Y, Y=Y, tie; i2 beta Y≠N, N=N, tie: 5 of 6.
    """
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    acc = {
        name: (row["compared"], row["acc"], row["gold"])
        for name in ("expert-1", "expert-2", "expert-3")
        for row in [_one(report, "sources", source=name, subset="overall")]
    }
    assert acc == {
        "expert-1": (7, pytest.approx(5 / 7), "other-experts"),
        "expert-2": (8, pytest.approx(5 / 8), "other-experts"),
        "expert-3": (6, pytest.approx(5 / 6), "other-experts"),
    }


def test_an_expert_whose_vote_makes_the_majority_is_not_credited_with_it():
    """One instruction, two questions, three experts and a judge (Y YES, N NO):

                alpha  beta
      expert-1   YY     NN
      expert-2   YN     YY
      expert-3   NN     YN
      judge      YN     YN

    Majority of all three: alpha YN, beta YN; DRFR 1/2 each, so a tie (category 0).
    expert-1 against it would be right on 2 of 4, PLD 1. Against expert-2 and expert-3 only:
    alpha tie, N; beta Y, tie; DRFR alpha 0/1, beta 1/1 (category -1), while expert-1 says
    alpha (1): ACC 0 of 2, PLD 2. The judge and the majority keep the majority of all three:
    the judge is right on 4 of 4, PLD 0, and so is the majority.
    """
    benchmark = BenchmarkFactory(name="own-vote")
    instruction = InstructionFactory(benchmark=benchmark, subset=Subset.EASY)
    questions = [QuestionFactory(instruction=instruction, position=p) for p in (1, 2)]
    responses = [
        ResponseFactory(instruction=instruction, system=SystemFactory(name=name))
        for name in ("alpha", "beta")
    ]
    labels = {
        ("expert-1", AnnotatorKind.EXPERT): ("YY", "NN"),
        ("expert-2", AnnotatorKind.EXPERT): ("YN", "YY"),
        ("expert-3", AnnotatorKind.EXPERT): ("NN", "YN"),
        ("judge", AnnotatorKind.LLM): ("YN", "YN"),
    }
    values = {"Y": LabelValue.YES, "N": LabelValue.NO}
    for (name, kind), per_response in labels.items():
        annotator = AnnotatorFactory(name=name, kind=kind)
        for response, letters in zip(responses, per_response, strict=True):
            for question, letter in zip(questions, letters, strict=True):
                LabelFactory(
                    question=question, response=response, annotator=annotator, value=values[letter]
                )
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)

    def scores(source):
        row = _one(report, "sources", source=source, subset="overall")
        return row["gold"], row["compared"], row["acc"], row["pld1"], row["pld2"], row["wpld"]

    assert scores("expert-1") == ("other-experts", 2, 0.0, 0.0, 100.0, 2.0)
    assert scores("judge") == ("expert-majority", 4, 1.0, 0.0, 0.0, 0.0)
    assert scores("expert-majority") == ("expert-majority", 4, 1.0, 0.0, 0.0, 0.0)


def test_acc_counting_a_source_unknown_as_wrong_is_a_named_option(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, acc_unknown="wrong", n_resamples=200)
    judge = _one(report, "sources", source="judge", subset="overall")
    # The same 9 gold items, the judge's UNKNOWN now compared and wrong: 6 right of 9.
    assert (judge["compared"], judge["acc"]) == (9, pytest.approx(6 / 9))
    hard = _one(report, "sources", source="judge", subset="hard")
    # i2: gold YYY | NNN, judge YYN | NUN: 4 right of 6 (2 of 5 compared by default).
    assert (hard["compared"], hard["acc"]) == (6, pytest.approx(4 / 6))
    default = _one(
        report_build(scope=OPERATOR, benchmark=bench, n_resamples=10),
        "sources",
        source="judge",
        subset="hard",
    )
    assert (default["compared"], default["acc"]) == (5, pytest.approx(4 / 5))
    with pytest.raises(ReportError, match="acc_unknown must be one of exclude, wrong"):
        report_build(scope=OPERATOR, benchmark=bench, acc_unknown="no")


def test_crowd_cost_and_time_from_its_assignments(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    crowd = _one(report, "sources", source="crowd-majority", subset="overall")
    # 3 submitted assignments × ($1.00 + MTurk's 20% fee, no publication: a HIT of the project's
    # assignments per task, fewer than 10); first claim to last submission: 30 min.
    assert crowd["cost_usd"] == pytest.approx(3.60)
    assert crowd["time_min"] == pytest.approx(30.0)
    hard = _one(report, "sources", source="crowd-majority", subset="hard")
    assert hard["cost_usd"] is None
    judge = _one(report, "sources", source="judge", subset="overall")
    assert judge["cost_usd"] is None  # imported labels: nothing recorded, not zero


def _crowd_time(benchmark, subset: str = "overall"):
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    return _one(report, "sources", source="crowd-majority", subset=subset)["time_min"]


def _bench_work_on_a_link(bench):
    """The bench's crowd work (claimed at 0, 1 and 2 min, last submitted at 30 min) as done
    through a self-hosted link of its batch; returns (its task, its first claim)."""
    work = Assignment.objects.filter(annotator__name__startswith="crowd-")
    Annotator.objects.filter(assignments__in=work).update(platform="selfhosted")
    task = work.first().task
    fake_publication(task.batch, platform="selfhosted", link_token="link-1")
    return task, min(work.values_list("claimed_at", flat=True))


def _work_on_fake(
    task, name: str, *, claimed, minutes: int, status=AssignmentStatus.SUBMITTED, confirmed=True
):
    """A new crowd worker's assignment on the publication `name` on the offline platform (of a
    batch of its own in `task`'s project), which the platform confirmed (its record of it:
    Submitted) unless not `confirmed`."""
    publication = Publication.objects.filter(link_token=f"fake-{name}").first()
    if publication is None:
        batch = BatchFactory(project=task.batch.project)
        publication = fake_publication(batch, link_token=f"fake-{name}")
        TaskFactory(batch=batch, instruction=task.instruction)
    hit, _ = Hit.objects.get_or_create(
        publication=publication,
        task=publication.batch.tasks.get(),
        defaults={
            "hit_id": f"H-{name}",
            "unique_request_token": name,
            "max_assignments": 3,
            "status": HitStatus.CREATED,
        },
    )
    worker_id = f"{name}-{Annotator.objects.count()}"
    worker = AnnotatorFactory(
        name=f"fake:{worker_id}", kind=AnnotatorKind.CROWD, platform="fake", worker_id=worker_id
    )
    assignment = AssignmentFactory(
        task=hit.task,
        annotator=worker,
        status=status,
        claimed_at=claimed,
        submitted_at=claimed + timedelta(minutes=minutes),
        platform_hit_id=hit.hit_id,
        platform_assignment_id=f"A-{worker.worker_id}",
    )
    if not confirmed:
        return assignment
    PlatformAssignment.objects.create(
        hit=hit,
        platform_assignment_id=assignment.platform_assignment_id,
        worker_id=worker.worker_id,
        status="Submitted",
        assignment=assignment,
        synced_at=assignment.submitted_at,
    )
    return assignment


def test_crowd_time_leaves_out_the_days_between_two_publications(bench):
    """The paper's crowd time is the platform's statistics: the time its publications were
    worked on. An earlier publication of another batch, three days before the bench's link,
    worked on for 20 min: 20 + 30 min, not the three days between (4,350 min)."""
    task, start = _bench_work_on_a_link(bench)
    _work_on_fake(task, "earlier", claimed=start - timedelta(days=3), minutes=20)
    assert _crowd_time(bench) == pytest.approx(50.0)
    assert _crowd_time(bench, "easy") == pytest.approx(50.0)
    assert _crowd_time(bench, "hard") is None


def _in_house_crowd_work(bench, subset, *, claimed, minutes: int, status=None):
    """An assignment of `minutes` by a crowd account of no platform (a web account decided
    crowd), on a batch of its own in the bench's project and the bench's `subset` instruction:
    work that came through no publication."""
    project = Assignment.objects.get(annotator__name="crowd-1").task.batch.project
    task = TaskFactory(
        batch=BatchFactory(project=project),
        instruction=bench.instructions.get(subset=subset),
    )
    return AssignmentFactory(
        task=task,
        annotator=AnnotatorFactory(kind=AnnotatorKind.CROWD),
        status=status or AssignmentStatus.SUBMITTED,
        claimed_at=claimed,
        submitted_at=claimed + timedelta(minutes=minutes),
    )


def test_crowd_time_leaves_out_the_days_between_batches_without_a_publication(bench):
    """Crowd work through no publication (web accounts decided crowd, the demo's recorded
    study) is no one span: the bench's 30 min and another batch's 10-minute task on the hard
    instruction three days before are 40 min overall, not 4,350. An expert's work between
    them is not the crowd's."""
    first = Assignment.objects.get(annotator__name="crowd-1")
    start = first.claimed_at
    _in_house_crowd_work(bench, Subset.HARD, claimed=start - timedelta(days=3), minutes=10)
    AssignmentFactory(
        task=first.task,
        annotator=Annotator.objects.get(name="expert-1"),
        status=AssignmentStatus.SUBMITTED,
        claimed_at=start - timedelta(days=1),
        submitted_at=start - timedelta(days=1) + timedelta(minutes=10),
    )
    assert _crowd_time(bench) == pytest.approx(40.0)
    assert _crowd_time(bench, "easy") == pytest.approx(30.0)
    assert _crowd_time(bench, "hard") == pytest.approx(10.0)


def test_crowd_time_leaves_out_idle_days_inside_one_publication(bench):
    """One publication worked on 20 min six days ago and 20 min yesterday (resumed after its
    claims expired, or a HIT picked up late): 40 min of it beside the bench's 30, not the five
    days between (7,250 min)."""
    first = Assignment.objects.get(annotator__name="crowd-1")
    task, start = first.task, first.claimed_at
    _work_on_fake(task, "resumed", claimed=start - timedelta(days=6), minutes=20)
    _work_on_fake(task, "resumed", claimed=start - timedelta(days=1), minutes=20)
    assert _crowd_time(bench) == pytest.approx(70.0)


def test_crowd_time_counts_overlapping_assignments_once(bench):
    """The bench's work spans 0–30 min; a publication's worker from 20 to 45 min adds 15 min,
    not 25, another inside that, from 22 to 27, adds none, and the same publication's worker a
    day later their own 10 min: 55. The spans are read in one query, however many there
    are."""

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            source_costs(benchmark=bench)
        return len(captured)

    task = Assignment.objects.get(annotator__name="crowd-1").task
    start = task.assignments.order_by("claimed_at").first().claimed_at
    before = queries()
    _work_on_fake(task, "beside", claimed=start + timedelta(minutes=20), minutes=25)
    _work_on_fake(task, "beside", claimed=start + timedelta(minutes=22), minutes=5)
    _work_on_fake(task, "beside", claimed=start + timedelta(days=1), minutes=10)
    assert _crowd_time(bench) == pytest.approx(55.0)
    assert queries() == before


def test_crowd_time_leaves_out_work_that_does_not_count(bench):
    """Rejected work and work the platform never confirmed add no time, in a publication's
    idle hours or before it, and neither does a web crowd account's rejected work: the
    publication counts its confirmed 20 + 10 min, beside the bench's 30."""
    first = Assignment.objects.get(annotator__name="crowd-1")
    task, start = first.task, first.claimed_at
    earlier = start - timedelta(days=3)
    rejected = AssignmentStatus.REJECTED
    _work_on_fake(task, "earlier", claimed=earlier, minutes=20)
    _work_on_fake(task, "earlier", claimed=earlier + timedelta(hours=10), minutes=10)
    _work_on_fake(
        task, "earlier", claimed=earlier + timedelta(hours=5), minutes=10, status=rejected
    )
    _work_on_fake(
        task, "earlier", claimed=earlier + timedelta(hours=7), minutes=10, confirmed=False
    )
    _work_on_fake(
        task, "rejected-only", claimed=start - timedelta(days=2), minutes=10, status=rejected
    )
    _in_house_crowd_work(
        bench, Subset.EASY, claimed=start - timedelta(days=1), minutes=10, status=rejected
    )
    assert _crowd_time(bench) == pytest.approx(60.0)


def test_a_worker_blocked_after_being_paid_stays_in_the_crowd_cost(bench):
    """Blocking takes a worker's labels out of every result, not the money paid for them: an
    approved assignment was paid (the paper's crowd cost is what was paid on the platform); a
    blocked worker's unapproved one was not."""
    from annotate.crowd.models import WorkerBlock

    paid = Assignment.objects.get(annotator__name="crowd-1")
    paid.status = AssignmentStatus.APPROVED
    paid.save()
    WorkerBlock.objects.create(annotator=paid.annotator, reason="copied answers")
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    crowd = _one(report, "sources", source="crowd-majority", subset="overall")
    # Still 3 × $1.20: crowd-1's approved HIT was paid before the block.
    assert crowd["cost_usd"] == pytest.approx(3.60)
    unpaid = Assignment.objects.get(annotator__name="crowd-2")  # submitted, never approved
    WorkerBlock.objects.create(annotator=unpaid.annotator, reason="spam")
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    crowd = _one(report, "sources", source="crowd-majority", subset="overall")
    assert crowd["cost_usd"] == pytest.approx(2.40)


def test_bonuses_paid_are_in_the_crowd_cost_with_the_fee(bench):
    from decimal import Decimal

    from annotate.crowd.models import Bonus, BonusStatus
    from evaluation.services.reports import report_cached

    def crowd_cost():  # as the report page reads it: from the cache while nothing changed
        report = report_cached(benchmark=bench, scope=OPERATOR)
        return _one(report, "sources", source="crowd-majority", subset="overall")["cost_usd"]

    assert crowd_cost() == pytest.approx(3.60)
    assignment = Assignment.objects.get(annotator__name="crowd-1")
    for token, status in (("paid", BonusStatus.PAID), ("pending", BonusStatus.PENDING)):
        Bonus.objects.create(
            assignment=assignment,
            amount_usd=Decimal("0.40"),
            reason="careful work",
            unique_request_token=token,
            status=status,
        )
    # 3 × $1.20, and the one bonus paid: $0.40 + its 20% fee (not the one still pending).
    assert crowd_cost() == pytest.approx(4.08)


def test_cost_and_time_follow_a_per_project_kind_override(bench, settings):
    """crowd-1 is a crowd worker but an expert in this project: paid by the hour, not per HIT."""
    settings.EXPERT_HOURLY_RATE_USD = 59
    worker = Annotator.objects.get(name="crowd-1")
    assignment = Assignment.objects.get(annotator=worker)
    assignment.active_seconds = 1800
    assignment.save()
    ProjectAnnotatorKind.objects.create(
        project=assignment.task.batch.project, annotator=worker, kind=AnnotatorKind.EXPERT
    )
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    as_expert = _one(report, "sources", source="crowd-1", subset="overall")
    # 1800 s = 0.5 h × $59; claimed at 0 min, submitted at 10 min.
    assert (as_expert["source_kind"], as_expert["cost_usd"]) == ("expert", pytest.approx(29.5))
    assert as_expert["time_min"] == pytest.approx(10.0)
    majority = _one(report, "sources", source="expert-majority", subset="overall")
    assert (majority["cost_usd"], majority["time_min"]) == (pytest.approx(29.5), 10.0)
    crowd = _one(report, "sources", source="crowd-majority", subset="overall")
    # crowd-2 and crowd-3 only: 2 × $1.20; claimed at 1 min, last submitted at 30 min.
    assert crowd["cost_usd"] == pytest.approx(2.40)
    assert crowd["time_min"] == pytest.approx(29.0)


def test_an_experts_priced_assignment_stays_out_of_the_crowd_cost_and_its_pricing(
    bench, monkeypatch, settings
):
    """An in-house expert's assignment has a price too (the project's reward, a bonus paid on
    it): Table 4 pays the expert by the hour, and prices only the crowd's work. It priced every
    paid assignment of the benchmark, experts' included, and dropped them afterwards."""
    from datetime import timedelta
    from decimal import Decimal

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from annotate.crowd.models import Bonus, BonusStatus
    from evaluation.selectors import report_costs
    from evaluation.selectors.report_data import annotator_source

    def costs_and_queries():
        with CaptureQueriesContext(connection) as queries:
            costs = report_costs.source_costs(benchmark=bench)
        return costs["overall"], len(queries)

    settings.EXPERT_HOURLY_RATE_USD = 59
    _, queries_before = costs_and_queries()
    task = Assignment.objects.get(annotator__name="crowd-1").task
    claimed = timezone.now() - timedelta(hours=1)
    for name in ("expert-1", "expert-2"):
        assignment = AssignmentFactory(
            task=task,
            annotator=Annotator.objects.get(name=name),
            status=AssignmentStatus.APPROVED,
            active_seconds=1800,
            claimed_at=claimed,
            submitted_at=claimed + timedelta(minutes=30),
        )
        Bonus.objects.create(
            assignment=assignment,
            amount_usd=Decimal("0.40"),
            reason="careful work",
            unique_request_token=f"bonus-{name}",
            status=BonusStatus.PAID,
        )
    costs, queries_after = costs_and_queries()
    assert queries_after == queries_before  # however many experts' assignments there are
    assert costs["crowd-majority"].cost_usd == pytest.approx(3.60)  # 3 × $1.20, as before
    expert = Annotator.objects.get(name="expert-1")
    # 1800 s = 0.5 h × $59, the bonus not added to it.
    assert costs[annotator_source(expert.pk)].cost_usd == pytest.approx(29.5)

    priced = []
    price = report_costs.crowd_paid_per_assignment

    def priced_spy(assignments, **kwargs):
        priced.extend(assignments.values_list("annotator__name", flat=True))
        return price(assignments, **kwargs)

    monkeypatch.setattr(report_costs, "crowd_paid_per_assignment", priced_spy)
    report_costs.source_costs(benchmark=bench)
    assert sorted(priced) == ["crowd-1", "crowd-2", "crowd-3"]


def test_breakdowns_by_constraint_type_and_domain(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    # Expert majority, beta: Content questions i1 q1 (Y) and i2 q1-q3 (NNN) → 1/4;
    # i1 q2 (N) is Format and Number at once and counts under both.
    content = _one(
        report, "constraints", source="expert-majority", system="beta", constraint="Content"
    )
    assert (content["yes"], content["questions"]) == (1, 4)
    for constraint in ("Format", "Number"):
        row = _one(
            report, "constraints", source="expert-majority", system="beta", constraint=constraint
        )
        assert (row["yes"], row["questions"]) == (0, 1)
    poetry = _one(report, "domains", source="expert-majority", system="alpha", domain="Poetry")
    assert (poetry["yes"], poetry["questions"]) == (3, 3)


def test_disagreement_levels_of_the_experts(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    levels = {r["level"]: r["questions"] for r in _rows(report, "disagreement", group="expert")}
    # i1 q1: beta split; i1 q2: alpha split (Y, N; U is no vote); i2 q1: beta split;
    # i2 q2: unanimous; i2 q3: both split.
    assert levels == {0: 1, 1: 3, 2: 1}


def test_disagreement_levels_stop_at_the_most_systems_people_labelled(bench):
    """A system of the benchmark no person labelled (the demo's generated one) cannot split:
    no level counts it, rather than a level always 0.0 in the figure."""
    gamma = SystemFactory(name="gamma")
    for instruction in bench.instructions.all():
        ResponseFactory(instruction=instruction, system=gamma)
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    levels = {r["level"]: r["questions"] for r in _rows(report, "disagreement", group="expert")}
    assert levels == {0: 1, 1: 3, 2: 1}
    root = ET.fromstring(render_figure(report, "disagreement", "svg"))
    texts = {"".join(element.itertext()) for element in root.iter(f"{SVG}text")}
    assert {"0", "1", "2"} <= texts and "3" not in texts  # the x-axis ticks


def test_drfr_by_display_position_reveals_what_was_shown_first(bench):
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    positions = {r["position"]: (r["yes"], r["questions"]) for r in report["positions"]}
    # Shown as System A: crowd-1 alpha YY, crowd-2 beta YN, crowd-3 alpha YY.
    assert positions == {"A": (5, 6), "B": (1, 6)}


def test_report_is_valid_json_with_every_documented_key(bench):
    import json

    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=50)
    parsed = json.loads(json.dumps(report, allow_nan=False))
    for key in ("leaderboard", "agreement", "sources", "constraints", "domains"):
        assert parsed[key], key
    assert set(parsed["leaderboard"][0]) == {
        "system",
        "source",
        "source_kind",
        "subset",
        "drfr",
        "ci_low",
        "ci_high",
        "yes",
        "questions",
        "responses_labelled",
        "responses",
        "provisional",
    }


def test_empty_benchmark_gives_an_empty_report():
    report = report_build(scope=OPERATOR, benchmark=BenchmarkFactory(), n_resamples=50)
    assert report["leaderboard"] == [] and report["agreement"] == [] and report["sources"] == []


def test_seeded_bootstrap_is_reproducible(bench):
    first = report_build(scope=OPERATOR, benchmark=bench, n_resamples=100, seed=7)
    again = report_build(scope=OPERATOR, benchmark=bench, n_resamples=100, seed=7)
    assert first["leaderboard"] == again["leaderboard"]


def test_the_reader_whose_names_the_report_shows_must_be_given():
    """Without a scope, report_build named every platform worker as an operator sees them: a web
    caller forgetting it would have shown worker ids to anyone. It is a required keyword."""
    with pytest.raises(TypeError, match="scope"):
        report_build(benchmark=BenchmarkFactory(), n_resamples=10)


def test_a_crowd_label_is_placed_where_its_assignment_showed_its_response(bench):
    """Each label given through an assignment is at the display position its response's system
    had in that assignment (0 = System A): a system listed twice at its last place, an id of no
    system of the benchmark skipped, and an order left empty showing the system nowhere (-1)."""
    from annotate.models import Assignment, System
    from evaluation.selectors.report_data import benchmark_arrays

    alpha, beta = (System.objects.get(name=name).pk for name in ("alpha", "beta"))
    orders = {
        "crowd-1": [beta, 999_999, alpha],
        "crowd-2": [alpha, beta, alpha],
        "crowd-3": [],
    }
    for name, order in orders.items():
        Assignment.objects.filter(annotator__name=name).update(display_order=order)
    data = benchmark_arrays(benchmark=bench)
    positions = {
        name: sorted(data.shown_position[data.shown_annotator == index].tolist())
        for index, name in enumerate(data.annotator_names)
        if name in orders
    }
    # Two questions on alpha's response and two on beta's, per worker.
    assert positions == {
        "crowd-1": [0, 0, 2, 2],
        "crowd-2": [1, 1, 2, 2],
        "crowd-3": [-1, -1, -1, -1],
    }


def test_a_subset_of_one_instruction_has_no_interval_not_a_point(bench):
    """Easy and hard are one instruction each: every resample draws that instruction, so the
    leaderboard's easy and hard intervals were [DRFR, DRFR] and the direct-score kappa's of
    the easy set [κ, κ], a spread of nothing. They are null; overall (two) keeps them, but
    for a source that labelled one instruction."""
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    for subset in ("easy", "hard"):
        for row in _rows(report, "leaderboard", subset=subset):
            assert (row["ci_low"], row["ci_high"]) == (None, None), row
    judge = _one(report, "leaderboard", source="judge", system="alpha", subset="easy")
    assert judge["drfr"] is not None
    overall = _rows(report, "leaderboard", subset="overall")
    # The crowd labelled the easy instruction only: overall too is one instruction for it.
    # The others with none answered YES to every question (or NO to every one) of both
    # instructions: every resample gives the same DRFR, no spread measured (it read [1, 1]).
    without = {(r["source"], r["system"], r["drfr"]) for r in overall if r["ci_low"] is None}
    assert {source for source, _, drfr in without if drfr not in (0.0, 1.0)} <= {"crowd-majority"}
    assert ("crowd-majority", "alpha", 1.0) in without and ("expert-1", "alpha", 1.0) in without
    assert all(r["ci_low"] < r["ci_high"] for r in overall if r["ci_low"] is not None)
    easy = _one(report, "agreement", protocol="ds", group="expert", subset="easy")
    assert easy["fleiss_kappa"] is not None and easy["items"] == 1
    assert (easy["ci_low"], easy["ci_high"]) == (None, None)


def test_a_kappa_without_items_says_which_ratings_are_missing(bench):
    """Fleiss' kappa of no item said only "no items": the crowd rated the easy instruction
    alone, so its Hard Set kappa reads no item, for want of three ratings of one."""
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    row = _one(report, "agreement", protocol="drfr", group="crowd", subset="hard")
    assert (row["fleiss_kappa"], row["items"], row["annotators"]) == (None, 0, 3)
    assert row["undefined_reason"] == (
        "no item of this subset has ratings from 3 annotators, the number kappa reads"
    )
    easy = _one(report, "agreement", protocol="drfr", group="crowd", subset="easy")
    assert (easy["fleiss_kappa"] is not None, easy["undefined_reason"]) == (True, "")

    Label.objects.filter(annotator__name__in=["crowd-2", "crowd-3"]).delete()
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=200)
    for subset in ("easy", "hard", "overall"):
        row = _one(report, "agreement", protocol="drfr", group="crowd", subset=subset)
        assert row["fleiss_kappa"] is None
        assert row["undefined_reason"] == "no item has ratings from two annotators or more"


def test_table_4_says_why_each_acc_and_pld_is_missing(bench):
    """A judge that labelled one system has an ACC but ranks no pair of systems: its PLD is
    missing because it labelled one system per instruction, not for want of an expert majority
    (what the page said of every "–"). The crowd, which labelled only the easy instruction, has
    no question in common with the experts in the hard set."""
    Label.objects.filter(annotator__name="judge", response__system__name="beta").delete()
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)

    judge = _one(report, "sources", source="judge", subset="overall")
    assert judge["acc"] is not None and judge["acc_na"] is None
    assert (judge["pld0"], judge["pairs"], judge["pld_na"]) == (None, 0, "source_one_system")
    crowd = _one(report, "sources", source="crowd-majority", subset="hard")
    assert (crowd["acc"], crowd["acc_na"]) == (None, "no_common_question")
    assert crowd["pld_na"] == "source_one_system"
    majority = _one(report, "sources", source="expert-majority", subset="overall")
    assert (majority["acc_na"], majority["pld_na"]) == (None, None)


def test_table_4_says_an_expert_alone_has_no_gold_label(bench):
    Label.objects.filter(annotator__name__in=["expert-2", "expert-3"]).delete()
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    alone = _one(report, "sources", source="expert-1", subset="overall")
    assert (alone["acc_na"], alone["pld_na"]) == ("no_gold_label", "no_gold_label")


def test_kappa_counts_items_nobody_of_the_group_rated_as_dropped(bench):
    """The crowd labelled only the easy instruction: the hard set's one item (its one pair of
    systems) has no crowd rating. It was neither among the items nor dropped, so Items 1 and
    Dropped 0 on a set of two items (docs/reports.md: dropped are the set's items with fewer
    raters than the row reads)."""
    # A third system only the judge labelled: its pairs are no items of the crowd's (or the
    # experts') study, and none is dropped for it.
    gamma = SystemFactory(name="gamma")
    for instruction in bench.instructions.all():
        response = ResponseFactory(instruction=instruction, system=gamma)
        judge = Annotator.objects.get(name="judge")
        for question in instruction.questions.all():
            LabelFactory(question=question, response=response, annotator=judge)
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    counts = {
        (row["group"], row["subset"]): (row["items"], row["dropped"])
        for row in _rows(report, "agreement", protocol="drfr")
    }
    assert counts == {
        ("crowd", "easy"): (1, 0),
        ("crowd", "hard"): (0, 1),
        ("crowd", "overall"): (1, 1),
        ("expert", "easy"): (1, 0),
        ("expert", "hard"): (1, 0),
        ("expert", "overall"): (2, 0),
    }


def test_the_leaderboard_says_how_many_responses_each_source_labelled(bench):
    """A source that labelled part of the benchmark (the crowd: the easy instruction only; a
    judge run stopped part-way) had an Overall DRFR like any other's."""
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    crowd = _one(report, "leaderboard", source="crowd-majority", system="alpha", subset="overall")
    assert (crowd["responses_labelled"], crowd["responses"]) == (1, 2)
    easy = _one(report, "leaderboard", source="crowd-majority", system="alpha", subset="easy")
    assert (easy["responses_labelled"], easy["responses"]) == (1, 1)
    judge = _one(report, "leaderboard", source="judge", system="beta", subset="overall")
    assert (judge["responses_labelled"], judge["responses"]) == (2, 2)


def test_a_span_ending_before_it_starts_takes_no_time_off_the_crowds():
    """Imported work with skewed clocks (submitted before claimed) made the union's running total
    shrink by its negative length: it now covers no time, and the others count in full."""
    from datetime import UTC, datetime, timedelta

    from evaluation.selectors.report_costs import _union_minutes

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    minutes = [(t0, t0 + timedelta(minutes=30)), (t0 + timedelta(hours=2), t0 + timedelta(hours=1))]
    assert _union_minutes(minutes) == 30
