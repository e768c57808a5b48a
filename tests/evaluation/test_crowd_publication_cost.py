"""What the crowd publish preview and the publication page say a batch costs is what the report's
Table 4 counts once the work is in (docs/reports.md, Cost)."""

import re
import threading
from decimal import Decimal
from functools import partial

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.models import Bonus, BonusStatus, Publication
from annotate.crowd.services import review
from annotate.models import Assignment, AssignmentStatus
from evaluation.selectors import report_data
from evaluation.selectors.report_costs import source_costs
from tests.annotate.crowd.conftest import publish_form, published_on_fake
from tests.factories import project_with_tasks
from tests.threads import in_thread

pytestmark = pytest.mark.django_db

FORM = publish_form("selfhosted", reward_usd="2.00", completion_code="C0DE-1", completion_url="")


def _table4_crowd_cost(benchmark) -> Decimal:
    cost = source_costs(benchmark=benchmark)["overall"]["crowd-majority"].cost_usd
    return Decimal(str(cost)).quantize(Decimal("0.01"))


def _do_every_task(participant: str, publication: Publication) -> None:
    worker = Client()
    join = reverse("crowd:selfhosted-join", args=[publication.link_token])
    for _ in range(publication.batch.tasks.count()):
        started = worker.post(join, {"PROLIFIC_PID": participant})
        page = worker.get(started["Location"]).text
        answers = {name: "yes" for name in set(re.findall(r'name="(r\d+_q\d+)"', page))}
        done = worker.post(started["Location"], answers)
        assert 'id="completion-code">C0DE-1<' in done.text


@pytest.fixture
def selfhosted_batch(client, settings, admin_user):
    """Two tasks wanting two assignments each, on the publish page of a logged-in admin."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    project = project_with_tasks(instructions=2, systems=2, questions=1, assignments_per_task=2)
    client.force_login(admin_user)
    return project.batches.get()


def _selfhosted_done_by_two(client, batch, capture_on_commit) -> Publication:
    """Publish `batch` as a self-hosted link through the publish page; P1 and P2 then do every
    task."""
    with capture_on_commit(execute=True):
        client.post(
            reverse("crowd:publish", args=[batch.pk]),
            {**FORM, "confirm_total": "8.00", "publish": "1"},
        )
    publication = Publication.objects.get(batch=batch)
    for participant in ("P1", "P2"):
        _do_every_task(participant, publication)
    return publication


def test_selfhosted_preview_is_what_table_4_counts_once_the_work_is_in(
    client, selfhosted_batch, django_capture_on_commit_callbacks
):
    preview = client.post(
        reverse("crowd:publish", args=[selfhosted_batch.pk]), {**FORM, "preview": "1"}
    )
    # 2 tasks × 2 assignments × $2.00, no platform fee: paid on the recruiting site.
    assert 'id="cost-total">$8.00<' in preview.text
    assert 'id="paid-outside"' in preview.text and "Prolific" in preview.text
    assert "Confirm: publish ($8.00 to pay on your recruiting site)" in preview.text
    publication = _selfhosted_done_by_two(
        client, selfhosted_batch, django_capture_on_commit_callbacks
    )
    project = selfhosted_batch.project
    assert _table4_crowd_cost(project.benchmark) == Decimal("8.00")

    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    # Everything submitted, nothing reviewed: the page counts what Table 4 counts.
    assert 'id="spent-total">$8.00<' in page
    assert "submitted, not reviewed yet: 4 assignments, $8.00" in page


def test_a_blocked_selfhosted_workers_work_stays_spent_until_rejected(
    client, selfhosted_batch, admin_user, django_capture_on_commit_callbacks
):
    """P1 was handed the completion code with each submission: the recruiting site pays them
    unless the submission is rejected there, whether or not P1 is blocked here since."""
    publication = _selfhosted_done_by_two(
        client, selfhosted_batch, django_capture_on_commit_callbacks
    )
    p1 = Assignment.objects.filter(annotator__worker_id="P1").first().annotator
    review.worker_block(annotator_id=p1.pk, reason="answers at random", user=admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert 'id="spent-total">$8.00<' in page
    # P1's work counts in no result while the block lasts (kept as late work), but the
    # recruiting site pays it: Table 4's cost is what was spent, as the page says. It said
    # Table 4 left out work "submitted late", which a blocked worker's work is marked.
    assert _table4_crowd_cost(selfhosted_batch.project.benchmark) == Decimal("8.00")
    rule = _spent_rule(page)
    assert "the report's crowd cost (Table 4) is this same figure" in rule
    assert "submitted late" not in rule
    # Rejected here (and, as the page tells, on the recruiting site): no longer spent.
    for assignment in Assignment.objects.filter(annotator=p1):
        review.assignment_reject(assignment_id=assignment.pk, feedback="random", user=admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert 'id="spent-total">$4.00<' in page
    assert _table4_crowd_cost(selfhosted_batch.project.benchmark) == Decimal("4.00")


@pytest.fixture
def fake_platform():
    from annotate.crowd.fake import FakePlatform

    FakePlatform.reset()
    yield FakePlatform()
    FakePlatform.reset()


def _mturk_work(client, hit, worker: str, platform, *, hand_back: bool = True) -> Assignment:
    """A worker accepts the HIT, answers on our page and (unless `hand_back` is False: not
    yet) the browser hands it back."""
    assignment_id = platform.worker_accept(hit_id=hit.hit_id, worker_id=worker)
    opened = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {
            "assignmentId": assignment_id,
            "hitId": hit.hit_id,
            "workerId": worker,
            "turkSubmitTo": "https://workersandbox.mturk.com",
        },
    )
    page = client.get(opened["Location"]).text
    answers = {name: "yes" for name in set(re.findall(r'name="(r\d+_q\d+)"', page))}
    assert client.post(opened["Location"], answers).status_code == 200
    if hand_back:
        platform.worker_submit(assignment_id=assignment_id)
    return Assignment.objects.get(platform_assignment_id=assignment_id)


def _published(*, instructions: int, reward_usd: str) -> Publication:
    """A project of `instructions` tasks (two systems, one question, one assignment each)
    published on the offline platform at `reward_usd` an assignment."""
    project = project_with_tasks(
        instructions=instructions, systems=2, questions=1, assignments_per_task=1
    )
    return published_on_fake(project.batches.get(), reward_usd=Decimal(reward_usd))


def _every_hit_done(publication: Publication, platform) -> list[Assignment]:
    """Worker AW<n> does the publication's n-th HIT (from 0) and hands it back."""
    hits = publication.hits.order_by("id")
    return [_mturk_work(Client(), hit, f"AW{n}", platform) for n, hit in enumerate(hits)]


def test_bonuses_show_on_their_row_and_the_publication_counts_what_table_4_counts(
    client, fake_platform, admin_user, django_capture_on_commit_callbacks
):
    publication = _published(instructions=3, reward_usd="1.00")
    project = publication.batch.project
    paid, waiting, rejected = _every_hit_done(publication, fake_platform)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    client.force_login(admin_user)
    review_url = reverse("crowd:review", args=[publication.pk])
    for assignment, action in ((paid, "approve"), (rejected, "reject")):
        client.post(
            reverse("crowd:assignment-action", args=[assignment.pk]),
            {"action": action, "feedback": "thanks"},
            HTTP_REFERER=review_url,
        )
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("crowd:assignment-action", args=[paid.pk]),
            {"action": "bonus", "amount": "0.40", "feedback": "careful work"},
            HTTP_REFERER=review_url,
        )
    Bonus.objects.create(  # refused by the platform: shown, but not paid, so not counted
        assignment=paid,
        amount_usd=Decimal("0.10"),
        reason="r",
        unique_request_token="refused",
        status=BonusStatus.FAILED,
        error="Not enough funds.",
    )

    row = client.get(review_url).text.split(f'data-assignment="{paid.pk}"')[1].split("</tr>")[0]
    assert 'Bonus $0.40: <strong class="bonus-status">paid</strong>' in row
    assert 'Bonus $0.10: <strong class="bonus-status error">failed</strong>' in row
    assert "(Not enough funds.)" in row
    assert "Pay another bonus" in row and "already has 2 bonuses" in row

    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    # MTurk's 20 %: approved $1 + $0.20 and the $0.40 bonus + $0.08; waiting $1.20; rejected:
    # nothing.
    assert "approved work: 1 assignment, $1.68 with the bonuses paid on them" in page
    assert "submitted, not reviewed yet: 1 assignment, $1.20" in page
    assert 'id="spent-total">$2.88<' in page
    assert _table4_crowd_cost(project.benchmark) == Decimal("2.88")


def test_a_worker_counted_as_an_expert_leaves_table_4_but_not_what_was_spent(
    client, selfhosted_batch, django_capture_on_commit_callbacks
):
    from annotate.models import Annotator, AnnotatorKind
    from annotate.services.annotators import annotator_project_kind_set

    publication = _selfhosted_done_by_two(
        client, selfhosted_batch, django_capture_on_commit_callbacks
    )
    project = selfhosted_batch.project
    second = Annotator.objects.get(kind=AnnotatorKind.CROWD, name__contains="P2")

    # The researcher decides P2 is one of the project's experts: Table 4 pays P2 by the hour
    # now, but the recruiting site paid P2's two tasks all the same, and "Spent so far" is
    # what was paid (it left that figure, which the admin pays from).
    annotator_project_kind_set(project=project, annotator=second, kind=AnnotatorKind.EXPERT)

    assert _table4_crowd_cost(project.benchmark) == Decimal("4.00")
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert 'id="spent-total">$8.00<' in page
    assert "submitted, not reviewed yet: 4 assignments, $8.00" in page
    assert "the report's crowd cost (Table 4) is this same figure" in page
    assert "without the work of those not counted as crowd workers" in page


def test_platform_workers_set_to_undecided_stay_in_what_was_spent(
    client, fake_platform, admin_user
):
    """MTurk pays a worker's confirmed work whatever kind a researcher gives them here: a
    worker made "not decided yet" (their labels count nowhere) left "Spent so far" while the
    platform paid them."""
    from annotate.models import AnnotatorKind
    from annotate.services.annotators import annotator_kind_set

    publication = _published(instructions=2, reward_usd="1.00")
    project = publication.batch.project
    approved, waiting = _every_hit_done(publication, fake_platform)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.assignment_approve(assignment_id=approved.pk, user=admin_user)
    for assignment in (approved, waiting):
        annotator_kind_set(
            annotator=assignment.annotator, kind=AnnotatorKind.UNDECIDED, now=timezone.now()
        )

    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    # $1 + 20 % each: one paid, one the platform pays when its auto-approval delay ends.
    assert "approved work: 1 assignment, $1.20 with the bonuses paid on them" in page
    assert "submitted, not reviewed yet: 1 assignment, $1.20" in page
    assert 'id="spent-total">$2.40<' in page
    assert "crowd-majority" not in source_costs(benchmark=project.benchmark)["overall"]


def test_work_rejected_here_before_the_platform_had_it_shows_as_to_be_paid(
    client, fake_platform, admin_user
):
    """The worker's hand-back reaches the platform after the admin's reject: the platform
    holds it as submitted and pays it when the auto-approval delay ends unless it is rejected
    there too. "Spent so far" counted none of that money."""
    publication = _published(instructions=3, reward_usd="1.00")
    first, second, third = publication.hits.order_by("id")
    late = _mturk_work(Client(), first, "AW1", fake_platform, hand_back=False)
    also_late = _mturk_work(Client(), second, "AW2", fake_platform, hand_back=False)
    _mturk_work(Client(), third, "AW3", fake_platform)
    for assignment in (late, also_late):  # unknown to the platform: rejected here only
        review.assignment_reject(assignment_id=assignment.pk, user=admin_user, feedback="no")
    for assignment in (late, also_late):
        fake_platform.worker_submit(assignment_id=assignment.platform_assignment_id)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())

    client.force_login(admin_user)
    url = reverse("crowd:publication", args=[publication.pk])
    page = client.get(url).text
    line = page.split('id="spent-unless-rejected">', 1)[1].split("</li>", 1)[0]
    assert "Will be paid unless rejected on the platform: $2.40 (2 assignments)" in line
    assert reverse("crowd:review", args=[publication.pk]) in line
    assert "submitted, not reviewed yet: 1 assignment, $1.20" in page
    assert 'id="spent-total">$3.60<' in page

    # Rejected on the platform too (the review page's button): the platform pays nothing.
    for assignment in (late, also_late):
        review.assignment_reject(assignment_id=assignment.pk, user=admin_user, feedback="no")
    page = client.get(url).text
    assert 'id="spent-unless-rejected"' not in page
    assert 'id="spent-total">$1.20<' in page


def test_work_rejected_here_that_the_platform_approved_stays_in_what_was_spent(
    client, fake_platform, admin_user
):
    """Rejected here before the hand-back reached the platform, then approved there when its
    auto-approval delay ended (nobody rejected it there too): the platform paid it. A sync
    records the platform's Approved but leaves our rejection, and "Spent so far" dropped the
    money altogether."""
    publication = _published(instructions=2, reward_usd="1.00")
    first, second = publication.hits.order_by("id")
    rejected = _mturk_work(Client(), first, "AW1", fake_platform, hand_back=False)
    _mturk_work(Client(), second, "AW2", fake_platform)
    review.assignment_reject(assignment_id=rejected.pk, user=admin_user, feedback="no")
    fake_platform.worker_submit(assignment_id=rejected.platform_assignment_id)
    # The auto-approval delay ends on the platform before anyone rejects it there.
    fake_platform.assignment_approve(assignment_id=rejected.platform_assignment_id)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    rejected.refresh_from_db()
    assert rejected.status == AssignmentStatus.REJECTED
    assert rejected.platform_record.status == "Approved"

    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert "approved work: 1 assignment, $1.20 with the bonuses paid on them" in page
    assert "submitted, not reviewed yet: 1 assignment, $1.20" in page
    assert 'id="spent-unless-rejected"' not in page  # paid already: no reject can stop it
    assert 'id="spent-total">$2.40<' in page
    # Table 4's crowd cost is what the platform paid: it left the rejected work out ($1.20).
    assert _table4_crowd_cost(publication.batch.project.benchmark) == Decimal("2.40")


def test_table_4_rounds_the_crowd_cost_halves_up_as_the_publication_page_does(
    fake_platform, settings
):
    """A flat 25 % on $0.10 is $0.025, charged $0.03 (halves up, as every figure the app
    shows; Decimal's default and Python's round of a float make it $0.02): 2 × $0.13 is $0.26
    on the publication page and in Table 4 alike."""
    from annotate.crowd.selectors import publication_spending

    settings.CROWD_FEE_RATE = "0.25"

    publication = _published(instructions=2, reward_usd="0.10")
    project = publication.batch.project
    _every_hit_done(publication, fake_platform)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert publication_spending(publication=publication).total_usd == Decimal("0.26")
    costs = source_costs(benchmark=project.benchmark)
    assert costs["overall"]["crowd-majority"].cost_usd == 0.26


def test_the_publication_total_is_table_4s_and_the_sum_of_its_lines(
    client, fake_platform, admin_user, settings
):
    """One approved and one waiting assignment at $0.10 + 25 % ($0.025 charged $0.03): each
    line says $0.13, and the total is Table 4's $0.26, their sum: each payment is priced in
    whole cents, as the platform charges it. (The fee was once left unrounded and the total
    rounded once, $0.25, below the lines' $0.26 and what the platform charged.)"""
    settings.CROWD_FEE_RATE = "0.25"
    publication = _published(instructions=2, reward_usd="0.10")
    project = publication.batch.project
    approved, _ = _every_hit_done(publication, fake_platform)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.assignment_approve(assignment_id=approved.pk, user=admin_user)
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert "approved work: 1 assignment, $0.13 with the bonuses paid on them" in page
    assert "submitted, not reviewed yet: 1 assignment, $0.13" in page
    assert 'id="spent-total">$0.26<' in page
    assert _table4_crowd_cost(project.benchmark) == Decimal("0.26")


def _lapse_and_fill(assignment: Assignment) -> None:
    """The worker's claim lapses (the beat expires it) and an in-house annotator fills the
    task's one slot: the worker's submit is late."""
    from annotate.services.assignments import assignments_expire
    from tests.factories import AnnotatorFactory, AssignmentFactory

    assert assignments_expire(now=assignment.expires_at) >= 1
    AssignmentFactory(
        task=assignment.task,
        annotator=AnnotatorFactory(name=f"in-house {assignment.pk}"),
        status=AssignmentStatus.SUBMITTED,
        submitted_at=timezone.now(),
    )


def _open_mturk(client, hit, worker: str, platform) -> tuple[str, str]:
    """A worker accepts the HIT and opens our page: (their task page, assignment id)."""
    assignment_id = platform.worker_accept(hit_id=hit.hit_id, worker_id=worker)
    opened = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {
            "assignmentId": assignment_id,
            "hitId": hit.hit_id,
            "workerId": worker,
            "turkSubmitTo": "https://workersandbox.mturk.com",
        },
    )
    return opened["Location"], assignment_id


def _answer(client, task_url: str):
    page = client.get(task_url).text
    answers = {name: "yes" for name in set(re.findall(r'name="(r\d+_q\d+)"', page))}
    return client.post(task_url, answers)


def test_late_work_the_platform_confirmed_is_spent_on_a_line_of_its_own(
    client, fake_platform, admin_user
):
    """A worker whose claim lapsed while the task was filled submits late and hands the HIT
    back: the platform confirms it and pays it unless it is rejected there (our review page
    cannot reject late work), but "Spent so far" left it out, its total short by that pay.
    Late work the platform never confirmed (not handed back, or forged) costs nothing, and
    none of it counts in results or in Table 4."""
    from annotate.selectors.results import counted_assignments

    publication = _published(instructions=3, reward_usd="1.00")
    project = publication.batch.project
    first, second, third = publication.hits.order_by("id")
    late_ids = []
    for hit, worker in ((first, "AW1"), (second, "AW2")):
        worker_client = Client()
        task_url, assignment_id = _open_mturk(worker_client, hit, worker, fake_platform)
        _lapse_and_fill(Assignment.objects.get(platform_assignment_id=assignment_id))
        assert _answer(worker_client, task_url).status_code == 200
        late_ids.append(assignment_id)
    fake_platform.worker_submit(assignment_id=late_ids[0])  # AW2 never hands theirs back
    _mturk_work(Client(), third, "AW3", fake_platform)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    late, unconfirmed = (Assignment.objects.get(platform_assignment_id=i) for i in late_ids)
    assert late.is_late and late.platform_record.status == "Submitted"
    assert unconfirmed.is_late and not hasattr(unconfirmed, "platform_record")
    assert not counted_assignments().filter(pk__in=[late.pk, unconfirmed.pk]).exists()

    client.force_login(admin_user)
    url = reverse("crowd:publication", args=[publication.pk])
    page = client.get(url).text
    line = page.split('id="spent-late">', 1)[1].split("</li>", 1)[0]
    assert "Late work, paid by the platform: $1.20 (1 assignment)" in line
    assert "counts in no result" in line and "unless it is rejected there" in line
    assert "submitted, not reviewed yet: 1 assignment, $1.20" in page
    assert 'id="spent-total">$2.40<' in page
    # Late work counts in no result, but Table 4's cost is what the platform pays: with it
    # ($1.20 left it out, while "Spent so far" said $2.40).
    assert _table4_crowd_cost(project.benchmark) == Decimal("2.40")

    # The auto-approval delay ends: paid, still late work.
    fake_platform.assignment_approve(assignment_id=late_ids[0])
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    page = client.get(url).text
    assert "Late work, paid by the platform: $1.20 (1 assignment)" in page
    assert 'id="spent-total">$2.40<' in page


def test_late_work_rejected_on_the_platform_costs_nothing(client, fake_platform, admin_user):
    publication = _published(instructions=1, reward_usd="1.00")
    worker_client = Client()
    task_url, assignment_id = _open_mturk(
        worker_client, publication.hits.get(), "AW1", fake_platform
    )
    _lapse_and_fill(Assignment.objects.get(platform_assignment_id=assignment_id))
    _answer(worker_client, task_url)
    fake_platform.worker_submit(assignment_id=assignment_id)
    fake_platform.assignment_reject(assignment_id=assignment_id, feedback="too late")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())

    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert 'id="spent-late"' not in page
    assert 'id="spent-total">$0.00<' in page


def test_late_work_on_a_selfhosted_link_is_spent_once_its_code_was_given(
    client, selfhosted_batch, django_capture_on_commit_callbacks
):
    """A participant whose claim lapsed while the task was filled submits late: the page gives
    them the completion code all the same, and the recruiting site pays whoever brings it back,
    but "Spent so far" said $0.00."""
    project = selfhosted_batch.project
    project.assignments_per_task = 1
    project.save()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("crowd:publish", args=[selfhosted_batch.pk]),
            {**FORM, "confirm_total": "4.00", "publish": "1"},
        )
    publication = Publication.objects.get(batch=selfhosted_batch)
    worker = Client()
    join = reverse("crowd:selfhosted-join", args=[publication.link_token])
    task_url = worker.post(join, {"PROLIFIC_PID": "P1"})["Location"]
    _lapse_and_fill(Assignment.objects.get(annotator__worker_id="P1"))
    done = _answer(worker, task_url)
    assert 'id="completion-code">C0DE-1<' in done.text
    assert Assignment.objects.get(annotator__worker_id="P1").is_late

    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    line = page.split('id="spent-late">', 1)[1].split("</li>", 1)[0]
    assert "Late work, paid on the recruiting site: $2.00 (1 assignment)" in line
    assert "completion code" in line and "reject their submissions there" in line
    assert 'id="spent-total">$2.00<' in page


def _spent_rule(page: str) -> str:
    return page.split('id="spent-rule">', 1)[1].split("</p>", 1)[0]


def test_selfhosted_spending_says_the_recruiting_site_pays_what_was_handed_a_code(
    client, selfhosted_batch, django_capture_on_commit_callbacks
):
    """A self-hosted link has no platform: its participants were handed the completion code, and
    the recruiting site (Prolific) pays them unless the submission is rejected there. The note
    said "the platform paid" and that work rejected here "cost nothing"."""
    publication = _selfhosted_done_by_two(
        client, selfhosted_batch, django_capture_on_commit_callbacks
    )
    rule = _spent_rule(client.get(reverse("crowd:publication", args=[publication.pk])).text)
    assert "the platform" not in rule and "cost nothing" not in rule
    assert "handed the completion code" in rule and "unless it was rejected here" in rule
    assert "The recruiting site (Prolific, say) pays each assignment" in rule
    assert "reject their submissions on the recruiting site too" in rule


def test_platform_spending_says_the_platform_pays_what_it_confirmed(
    client, fake_platform, admin_user
):
    publication = _published(instructions=1, reward_usd="1.00")
    _every_hit_done(publication, fake_platform)
    client.force_login(admin_user)
    rule = _spent_rule(client.get(reverse("crowd:publication", args=[publication.pk])).text)
    assert rule.startswith("Every assignment the platform paid or will pay counts here")
    assert "Assignments rejected on the platform cost nothing" in rule
    assert "completion code" not in rule and "recruiting site" not in rule


@pytest.mark.parametrize(
    ("per_task", "reward", "one"),
    [(3, "0.40", "0.48"), (10, "0.40", "0.56"), (3, "0.03", "0.04")],
)
def test_table_4_prices_work_at_its_hits_mturk_rate_and_a_bonus_at_20_percent(
    fake_platform, admin_user, per_task, reward, one
):
    """MTurk's schedule (https://www.mturk.com/pricing): 20 % of a HIT of 3's $0.40 ($0.08),
    40 % of a HIT of 10's ($0.16), $0.01 at least on a $0.03 reward and on a $0.02 bonus. Table
    4 said 25 % of each, what MTurk never charged."""
    project = project_with_tasks(
        instructions=1, systems=2, questions=1, assignments_per_task=per_task
    )
    publication = published_on_fake(project.batches.get(), reward_usd=Decimal(reward))
    work = _mturk_work(Client(), publication.hits.get(), "AW1", fake_platform)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.assignment_approve(assignment_id=work.pk, user=admin_user)
    assert _table4_crowd_cost(project.benchmark) == Decimal(one)
    bonus = review.bonus_create(
        assignment_id=work.pk, amount_usd=Decimal("0.02"), reason="thanks", user=admin_user
    )
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    assert _table4_crowd_cost(project.benchmark) == Decimal(one) + Decimal("0.03")


def test_a_sync_confirming_late_work_moves_the_cached_table_4(fake_platform):
    """Late work counts nowhere but is paid once the platform confirms it: a sync confirming it
    moved Table 4's crowd cost, but not the cached report's fingerprint, so the report page
    kept the old cost (up to the cache's timeout) beside a publication page with the new."""
    from evaluation.services.reports import _fingerprint

    publication = _published(instructions=2, reward_usd="1.00")
    benchmark = publication.batch.project.benchmark
    hit, other = publication.hits.order_by("id")
    _mturk_work(Client(), other, "AW2", fake_platform)
    worker = Client()
    task_url, assignment_id = _open_mturk(worker, hit, "AW1", fake_platform)
    _lapse_and_fill(Assignment.objects.get(platform_assignment_id=assignment_id))
    assert _answer(worker, task_url).status_code == 200
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    before = _fingerprint(benchmark)
    assert _table4_crowd_cost(benchmark) == Decimal("1.20")
    fake_platform.worker_submit(assignment_id=assignment_id)  # the hand-back reaches MTurk
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert _table4_crowd_cost(benchmark) == Decimal("2.40")
    assert _fingerprint(benchmark) != before


@pytest.mark.parametrize(
    ("fee_rate", "per_task", "one"),
    [
        # A flat 25 %: $0.07 + $0.0175 is charged $0.09 (the platform charges whole cents on
        # each payment: a HIT of one assignment, a rejection's refund).
        ("0.25", 1, "0.09"),
        # MTurk's schedule, a HIT of 10: $0.07 + 40 % ($0.028) is $0.07 + $0.03.
        ("", 10, "0.10"),
    ],
)
def test_the_account_spent_so_far_the_preview_and_table_4_agree_to_the_cent(
    client, settings, admin_user, fee_rate, per_task, one
):
    """Seven tasks, one HIT each, 7 assignments approved at $0.07 and two $0.05 bonuses. At a
    flat 25 % the offline account paid 7 × $0.09 = $0.63 (each HIT's price rounded to cents),
    while the preview, "Spent so far" and Table 4 rounded 7 × $0.0875 = $0.6125 once: $0.61.
    Each bonus: $0.05 + $0.0125, $0.06 everywhere (at 20 %: $0.05 + $0.01)."""
    from annotate.crowd import fake
    from annotate.crowd.selectors import publication_spending
    from annotate.crowd.services import publishing
    from tests.annotate.crowd.conftest import crowd_assignment, submitted_on_fake_platform

    settings.CROWD_FEE_RATE = fee_rate
    fake.FakePlatform.reset()
    platform = fake.FakePlatform()
    batch = project_with_tasks(
        instructions=7, systems=2, questions=1, assignments_per_task=per_task
    ).batches.get()
    reward = Decimal("0.07")
    preview = publishing.publication_preview(batch=batch, platform_name="fake", reward_usd=reward)
    before = platform.account_balance()
    publication = published_on_fake(batch, reward_usd=reward)
    offered = before - platform.account_balance()
    assert preview.total_usd == offered == 7 * per_task * Decimal(one), (preview, offered)

    works = []
    for n, hit in enumerate(publication.hits.order_by("id")):
        work = submitted_on_fake_platform(
            crowd_assignment(task=hit.task, platform="fake", worker=f"W{n}"),
            publication=publication,
        )
        review.assignment_approve(assignment_id=work.pk, user=admin_user)
        works.append(work)
    for work in works[:2]:
        bonus = review.bonus_create(
            assignment_id=work.pk, amount_usd=Decimal("0.05"), reason="thanks", user=admin_user
        )
        review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    # What the account paid for the approved work: the HITs' other assignments (nobody took
    # them) come back when the expired HITs are deleted, so they are left out here.
    never_taken = 7 * (per_task - 1) * Decimal(one)
    charged = before - platform.account_balance() - never_taken
    assert charged == 7 * Decimal(one) + 2 * Decimal("0.06")
    assert publication_spending(publication=publication).total_usd == charged
    assert _table4_crowd_cost(batch.project.benchmark) == charged
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert f'id="spent-total">${charged}<' in page
    assert "the fee rounded to cents on each payment as the platform charges it" in page
    fake.FakePlatform.reset()


def test_a_kind_changed_while_the_report_is_read_moves_labels_and_cost_together(
    fake_platform, admin_user, monkeypatch
):
    """Two crowd workers, one approved assignment each at $0.40 + 20 % = $0.48. A researcher
    counts AW0 as an expert after the report read the labels (both in the crowd majority) and
    before it read the costs: the crowd majority's cost was AW1's $0.48 alone, its labels
    both workers'. The report goes by the kinds its labels were read with: $0.96, and AW0 has
    no expert row of its own (the next report, with the new kind, has both moved)."""
    from annotate.models import AnnotatorKind
    from annotate.services.annotators import annotator_kind_set
    from evaluation.services import reports

    publication = _published(instructions=2, reward_usd="0.40")
    done = _every_hit_done(publication, fake_platform)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    for work in done:
        review.assignment_approve(assignment_id=work.pk, user=admin_user)
    benchmark = publication.batch.project.benchmark
    moved = done[0].annotator
    read_labels = reports.benchmark_arrays

    def kind_changed_after_the_labels(**kwargs):
        data = read_labels(**kwargs)
        annotator_kind_set(annotator=moved, kind=AnnotatorKind.EXPERT, now=timezone.now())
        return data

    monkeypatch.setattr(reports, "benchmark_arrays", kind_changed_after_the_labels)
    report = reports.report_compute(benchmark=benchmark, n_resamples=10)
    rows = {(r["source"], r["subset"]): r for r in report["sources"]}
    assert rows[("crowd-majority", "overall")]["cost_usd"] == 0.96
    assert (f"annotator:{moved.pk}", "overall") not in rows
    monkeypatch.setattr(reports, "benchmark_arrays", read_labels)
    report = reports.report_compute(benchmark=benchmark, n_resamples=10)
    rows = {(r["source"], r["subset"]): r for r in report["sources"]}
    assert rows[("crowd-majority", "overall")]["cost_usd"] == 0.48
    assert rows[(f"annotator:{moved.pk}", "overall")]["source_kind"] == "expert"


def _crowd_labels_and_cost(report: dict) -> tuple[dict[str, int], float | None]:
    """The crowd majority's YES labels per system, and its Table 4 cost (both overall)."""
    yes = {
        row["system"]: row["yes"]
        for row in report["leaderboard"]
        if row["source"] == "crowd-majority" and row["subset"] == "overall"
    }
    cost = next(
        row["cost_usd"]
        for row in report["sources"]
        if row["source"] == "crowd-majority" and row["subset"] == "overall"
    )
    return yes, cost


@pytest.mark.django_db(transaction=True)
def test_a_reject_while_the_report_is_read_moves_neither_its_labels_nor_its_cost(
    fake_platform, admin_user, monkeypatch
):
    """AW0 and AW1 each did one instruction (YES to its one question, both systems) at
    $0.40 + 20 % = $0.48: AW1's approved, AW0's submitted, counted and priced until reviewed.
    An admin rejects AW0's work after the report read the labels and before it read the costs:
    the report counted both workers' labels and AW1's pay alone. It reads both as of one moment
    (before the reject); the next report has both without AW0. The reject commits on a
    connection of its own, as another admin's request would."""
    from evaluation.services import reports

    publication = _published(instructions=2, reward_usd="0.40")
    done = _every_hit_done(publication, fake_platform)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.assignment_approve(assignment_id=done[1].pk, user=admin_user)
    benchmark = publication.batch.project.benchmark
    read_labels, read_costs = report_data.fetch_label_columns, reports.source_costs_and_kinds
    labels_read, verdicts = threading.Event(), []

    def labels_then_signal(benchmark_id):
        columns = read_labels(benchmark_id)
        labels_read.set()
        return columns

    def reject_before_the_costs(**kwargs):
        assert labels_read.wait(30)
        reject = partial(
            review.assignment_reject, assignment_id=done[0].pk, user=admin_user, feedback="no"
        )
        in_thread(reject, verdicts).join(30)
        return read_costs(**kwargs)

    monkeypatch.setattr(report_data, "fetch_label_columns", labels_then_signal)
    monkeypatch.setattr(reports, "source_costs_and_kinds", reject_before_the_costs)
    report = reports.report_compute(benchmark=benchmark, n_resamples=10)
    assert [v.status for v in verdicts] == [AssignmentStatus.REJECTED]
    yes, cost = _crowd_labels_and_cost(report)
    assert set(yes.values()) == {2}  # AW0's instruction and AW1's
    assert cost == 0.96  # both paid

    monkeypatch.setattr(reports, "source_costs_and_kinds", read_costs)
    yes, cost = _crowd_labels_and_cost(reports.report_compute(benchmark=benchmark, n_resamples=10))
    assert set(yes.values()) == {1}
    assert cost == 0.48


def test_a_subset_whose_only_crowd_work_was_rejected_here_but_paid_costs_what_was_paid(
    fake_platform, admin_user
):
    """The Easy task's only assignment was rejected here and approved on the platform; the
    Hard task's counts. Table 4's Easy row showed no crowd cost at all ("–") while $1.20 was
    paid for it, and Easy + Hard did not add up to the overall $2.40."""
    from annotate.selectors.identities import OPERATOR
    from evaluation.services.reports import report_build

    publication = _published(instructions=2, reward_usd="1.00")
    first, second = publication.hits.order_by("id")
    rejected = _mturk_work(Client(), first, "AW1", fake_platform, hand_back=False)
    _mturk_work(Client(), second, "AW2", fake_platform)
    review.assignment_reject(assignment_id=rejected.pk, user=admin_user, feedback="no")
    fake_platform.worker_submit(assignment_id=rejected.platform_assignment_id)
    fake_platform.assignment_approve(assignment_id=rejected.platform_assignment_id)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert rejected.task.instruction.subset == "easy"

    report = report_build(
        scope=OPERATOR, benchmark=publication.batch.project.benchmark, n_resamples=10
    )
    crowd = {r["subset"]: r for r in report["sources"] if r["source"] == "crowd-majority"}
    assert {s: crowd[s]["cost_usd"] for s in crowd} == {"easy": 1.2, "hard": 1.2, "overall": 2.4}
    assert crowd["easy"]["time_min"] is None  # rejected work adds no time
