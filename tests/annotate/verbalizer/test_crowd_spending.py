"""What a human study's publication page says was spent on it so far: the answers the platform
pays (approved, and submitted ones it confirmed, which it pays when the auto-approval delay
ends unless they are rejected; approved answers of workers blocked since), at the reward and fee
of that publication (a self-hosted link's reward, no fee), with the bonuses paid on them."""

import re
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import Bonus, BonusStatus, PlatformAssignment, Publication
from annotate.crowd.services import publishing, review
from annotate.crowd.services.publishing import PublishSettings
from annotate.models import AssignmentStatus
from annotate.roles import ADMIN
from annotate.verbalizer.models import HumanAnswer, HumanStudy
from annotate.verbalizer.services import crowd
from annotate.verbalizer.services.humans import human_answer_submit, human_study_create
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import AnnotatorFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(db, settings) -> HumanStudy:
    """Two prompts (SST-2 items 1 and 2, flipped golden, direct), three answers each."""
    settings.CROWD_FEE_RATE = "0.25"
    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="spend", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    return human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=3)


@pytest.fixture
def admin(client):
    user = UserFactory(username="boss", roles=[ADMIN], is_staff=True)
    client.force_login(user)
    return user


def _publish(study: HumanStudy, platform: str, reward: str) -> Publication:
    publication = crowd.study_publication_create(
        study=study,
        platform_name=platform,
        chosen=PublishSettings(title="Pick a word", description="d", reward_usd=Decimal(reward)),
        base_url="https://annotate.example.org",
    )
    return publishing.publication_publish(publication_id=publication.pk, now=timezone.now())


def _answer_on_fake(hit, worker: str, *, hand_back: bool = True) -> HumanAnswer:
    """A worker accepts the HIT on the offline platform, answers on our page and (unless
    `hand_back` is False: the page was left before MTurk had it) submits it there."""
    platform = FakePlatform()
    assignment_id = platform.worker_accept(hit_id=hit.hit_id, worker_id=worker)
    ticket = crowd.mturk_prompt_open(
        hit=hit, assignment_id=assignment_id, hit_id=hit.hit_id, worker_id=worker,
        turk_submit_to="https://www.mturk.com",
    )  # fmt: skip
    answer = crowd.mturk_answer_submit(ticket=ticket, key=1, seconds=2.0)
    if hand_back:
        platform.worker_submit(assignment_id=assignment_id)
    return answer


def _decide(client, answer: HumanAnswer, action: str, **fields) -> None:
    done = client.post(
        reverse("verbalizer:answer-action", args=[answer.pk]),
        {"action": action, "feedback": "thanks", **fields},
    )
    assert done.status_code == 302


def _spent(client, publication: Publication) -> dict[str, str]:
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    section = page.split('<section aria-labelledby="spending-heading" id="spending">', 1)[1]
    section = section.split("</section>", 1)[0]
    return {
        name: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text)).strip()
        for _, name, text in re.findall(r'<(li|strong) id="spent-([\w-]+)">(.*?)</\1>', section)
    }


def test_a_study_on_the_offline_platform_counts_what_the_platform_pays(
    client, admin, study, django_capture_on_commit_callbacks
):
    publication = _publish(study, "fake", "0.20")  # $0.20 × 1.25 = $0.25 an answer
    first, second = publication.hits.select_related("prompt").order_by("id")
    paid = _answer_on_fake(first, "W1")
    paid_with_bonus = _answer_on_fake(second, "W1")
    waiting = _answer_on_fake(first, "W2")
    rejected = _answer_on_fake(second, "W2")
    unconfirmed = _answer_on_fake(first, "W3", hand_back=False)
    blocked_later = _answer_on_fake(second, "W4")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    for answer in (paid, paid_with_bonus, blocked_later):
        _decide(client, answer, "approve")
    _decide(client, rejected, "reject")
    with django_capture_on_commit_callbacks(execute=True):
        _decide(client, paid_with_bonus, "bonus", amount="0.40")
    Bonus.objects.create(  # refused by the platform: not paid, so not spent
        human_answer=paid, amount_usd=Decimal("0.10"), reason="r",
        unique_request_token="refused", status=BonusStatus.FAILED, error="Not enough funds.",
    )  # fmt: skip
    review.worker_block(annotator_id=blocked_later.annotator_id, reason="random", user=admin)
    assert Bonus.objects.get(status=BonusStatus.PAID).human_answer == paid_with_bonus
    confirmed = set(PlatformAssignment.objects.values_list("human_answer_id", flat=True))
    assert waiting.pk in confirmed and unconfirmed.pk not in confirmed  # never on the platform
    unconfirmed.refresh_from_db()
    assert unconfirmed.status == AssignmentStatus.SUBMITTED

    # Approved: 3 × $0.25, and the $0.40 bonus × 1.25; waiting: W2's confirmed answer; W2's
    # rejected answer and W3's, which the platform never had, cost nothing.
    assert _spent(client, publication) == {
        "total": "$1.50",
        "approved": "approved answers: 3 answers, $1.25 with the bonuses paid on them",
        "waiting": "submitted, not reviewed yet: 1 answer, $0.25 (confirmed by the platform, "
        "which pays them when the auto-approval delay ends unless you reject them)",
    }


def test_a_study_on_a_selfhosted_link_counts_its_reward_and_no_fee(client, admin, study):
    """Beside a publication of the same study on the offline platform: each counts its own
    workers' answers, and an in-house annotator's answers count in neither."""
    link = _publish(study, "selfhosted", "0.30")
    on_fake = _publish(study, "fake", "0.20")
    _answer_on_fake(on_fake.hits.select_related("prompt").first(), "W1")
    review.publication_sync(publication_id=on_fake.pk, now=timezone.now())
    prompts = list(study.prompts.order_by("id"))
    answers = {}
    for worker, answered in (("P1", prompts), ("P2", prompts), ("P3", prompts[:1])):
        participant = crowd.study_link_start(publication=link, params={"PROLIFIC_PID": worker})
        for prompt in answered:
            answers[worker, prompt.pk] = crowd.link_answer_submit(
                participant=participant, prompt_id=prompt.pk, key=2, seconds=1.0
            )
    human_answer_submit(
        study=study, prompt_id=prompts[0].pk, annotator=AnnotatorFactory(), key=1, seconds=1.0
    )
    for prompt in prompts:
        _decide(client, answers["P1", prompt.pk], "approve")
    _decide(client, answers["P2", prompts[0].pk], "reject")

    # P1's 2 approved × $0.30; P2's second and P3's answer wait; P2's first was rejected.
    assert _spent(client, link) == {
        "total": "$1.20",
        "approved": "approved answers: 2 answers, $0.60",
        "waiting": "submitted, not reviewed yet: 2 answers, $0.60",
    }
    assert _spent(client, on_fake)["total"] == "$0.25"
    page = client.get(reverse("crowd:publication", args=[link.pk])).text
    assert "paid on the recruiting site (no fee counted)" in page


def test_a_link_of_a_study_without_a_completion_code_does_not_say_one_was_handed_out(
    client, admin, study
):
    """The rule under "Spent so far" said every answer counted "whose participant was handed
    the completion code" and that the recruiting site pays each code brought back, on a study
    that has no completion code or URL: its participants were handed nothing."""
    link = _publish(study, "selfhosted", "0.30")
    participant = crowd.study_link_start(publication=link, params={"PROLIFIC_PID": "P1"})
    prompt = study.prompts.order_by("id").first()
    crowd.link_answer_submit(participant=participant, prompt_id=prompt.pk, key=2, seconds=1.0)

    def rule() -> str:
        page = client.get(reverse("crowd:publication", args=[link.pk])).text
        return page.split('id="spent-rule">', 1)[1].split("</p>", 1)[0]

    assert _spent(client, link)["total"] == "$0.30"  # the answer counts, at the reward
    said = rule()
    assert "completion code" in said and "handed the completion code" not in said
    assert "Every answer submitted through this link counts here, at the reward" in said
    assert "The study has no completion code or URL, so no participant was handed one" in said
    HumanStudy.objects.filter(pk=study.pk).update(completion_code="C0DE")
    said = rule()
    assert "Every answer whose participant was handed the completion code counts here" in said
    assert "The recruiting site (Prolific, say) pays each answer" in said


def test_spending_rounds_each_fee_halves_up_and_the_total_is_the_lines_sum(client, admin, study):
    """$0.10 + 25 % ($0.025 of fee, charged $0.03: halves up, as every figure the app shows)
    is $0.13 an answer: each line says $0.13 and the total $0.26, what the platform charges
    (it was $0.25, the unrounded fees' sum rounded once)."""
    publication = _publish(study, "fake", "0.10")
    first, second = publication.hits.select_related("prompt").order_by("id")
    approved = _answer_on_fake(first, "W1")
    _answer_on_fake(second, "W1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    _decide(client, approved, "approve")
    assert _spent(client, publication) == {
        "total": "$0.26",
        "approved": "approved answers: 1 answer, $0.13 with the bonuses paid on them",
        "waiting": "submitted, not reviewed yet: 1 answer, $0.13 (confirmed by the platform, "
        "which pays them when the auto-approval delay ends unless you reject them)",
    }


def test_the_publication_page_reads_a_bounded_number_of_queries(
    client, admin, study, django_assert_max_num_queries
):
    """As many with answers as with none: the spending is three queries, whatever the work."""
    publication = _publish(study, "fake", "0.20")
    first, second = publication.hits.select_related("prompt").order_by("id")
    url = reverse("crowd:publication", args=[publication.pk])
    with django_assert_max_num_queries(11):
        client.get(url)
    for n, hit in enumerate((first, second, first, second, first)):
        _answer_on_fake(hit, f"W{n}")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    with django_assert_max_num_queries(11):
        assert 'id="spent-total">$1.25<' in client.get(url).text


def test_answers_stay_spent_whatever_kind_their_worker_is_given(client, admin, study):
    """The platform pays a worker's confirmed answers whatever a researcher decides about the
    worker here: one made "not decided yet" left the figure while the platform paid them."""
    from annotate.models import AnnotatorKind
    from annotate.services.annotators import annotator_kind_set

    publication = _publish(study, "fake", "0.20")
    first, second = publication.hits.select_related("prompt").order_by("id")
    approved = _answer_on_fake(first, "W1")
    waiting = _answer_on_fake(second, "W2")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    _decide(client, approved, "approve")
    for answer in (approved, waiting):
        annotator_kind_set(
            annotator=answer.annotator, kind=AnnotatorKind.UNDECIDED, now=timezone.now()
        )

    spent = _spent(client, publication)
    assert spent["total"] == "$0.50"
    assert spent["approved"] == "approved answers: 1 answer, $0.25 with the bonuses paid on them"
    assert spent["waiting"].startswith("submitted, not reviewed yet: 1 answer, $0.25")


def test_answers_rejected_here_before_the_platform_had_them_show_as_to_be_paid(
    client, admin, study
):
    """Rejected here, then handed back to the platform: it pays them when the auto-approval
    delay ends unless they are rejected there too, and no figure counted that money."""
    publication = _publish(study, "fake", "0.20")
    first, second = publication.hits.select_related("prompt").order_by("id")
    late = _answer_on_fake(first, "W1", hand_back=False)
    _answer_on_fake(second, "W2")
    _decide(client, late, "reject")  # unknown to the platform: rejected here only
    FakePlatform().worker_submit(assignment_id=late.platform_assignment_id)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())

    spent = _spent(client, publication)
    assert spent["unless-rejected"].startswith(
        "Will be paid unless rejected on the platform: $0.25 (1 answer)"
    )
    assert spent["total"] == "$0.50"

    _decide(client, late, "reject")  # "Reject on the platform too"
    spent = _spent(client, publication)
    assert "unless-rejected" not in spent and spent["total"] == "$0.25"


def test_a_blocked_workers_confirmed_answers_wait_to_be_paid(client, admin, study):
    """Blocking does not stop the platform paying a worker's submitted answers when the
    auto-approval delay ends: they stay on the figure until they are rejected."""
    publication = _publish(study, "fake", "0.20")
    first, second = publication.hits.select_related("prompt").order_by("id")
    answers = [_answer_on_fake(first, "W1"), _answer_on_fake(second, "W1")]
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.worker_block(annotator_id=answers[0].annotator_id, reason="random", user=admin)

    assert _spent(client, publication)["waiting"].startswith(
        "submitted, not reviewed yet: 2 answers, $0.50"
    )
    _decide(client, answers[0], "reject")
    assert _spent(client, publication)["total"] == "$0.25"


def test_an_undecided_workers_study_hit_stays_open_and_on_the_review_page(client, admin, study):
    """Made "not decided yet" while on a study's HIT: the worker's answer page answered 404,
    and their answer left the review page (and its reject button) while the platform pays it
    when the auto-approval delay ends."""
    from annotate.models import AnnotatorKind
    from annotate.services.annotators import annotator_kind_set

    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.select_related("prompt").order_by("id").first()
    platform = FakePlatform()
    assignment_id = platform.worker_accept(hit_id=hit.hit_id, worker_id="W1")
    ticket = crowd.mturk_prompt_open(
        hit=hit, assignment_id=assignment_id, hit_id=hit.hit_id, worker_id="W1",
        turk_submit_to="https://www.mturk.com",
    )  # fmt: skip
    annotator_kind_set(annotator=ticket.annotator, kind=AnnotatorKind.UNDECIDED, now=timezone.now())
    answer = crowd.mturk_answer_submit(
        ticket=crowd.mturk_ticket_get(token=ticket.token), key=1, seconds=2.0
    )
    platform.worker_submit(assignment_id=assignment_id)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())

    page = client.get(reverse("verbalizer:crowd-review", args=[publication.pk])).text
    assert f'data-answer="{answer.pk}"' in page
    _decide(client, answer, "reject")
    assert platform.assignment_get(assignment_id=assignment_id).status == "Rejected"


@pytest.mark.parametrize(("answers_per_prompt", "one"), [(3, "0.48"), (10, "0.56")])
def test_an_answer_on_mturks_schedule_pays_the_rate_of_its_prompts_hit(
    study, settings, answers_per_prompt, one
):
    """MTurk's schedule (CROWD_FEE_RATE empty): $0.40 on a HIT of 3 answers pays a $0.08 fee,
    on a HIT of 10 answers $0.16 (40%); a $0.02 bonus pays the $0.01 minimum."""
    from annotate.crowd.selectors import publication_spending

    settings.CROWD_FEE_RATE = ""
    study.answers_per_prompt = answers_per_prompt
    study.save(update_fields=["answers_per_prompt"])
    FakePlatform.reset()
    publication = _publish(study, "fake", "0.40")
    assert publication.fee_rate is None
    assert publication.hits.first().max_assignments == answers_per_prompt
    answer = _answer_on_fake(publication.hits.order_by("id").first(), "W1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert publication_spending(publication=publication).waiting_usd == Decimal(one)
    answer.status = AssignmentStatus.APPROVED
    answer.save(update_fields=["status"])
    Bonus.objects.create(
        human_answer=answer, amount_usd=Decimal("0.02"), reason="r",
        unique_request_token="b", status=BonusStatus.PAID,
    )  # fmt: skip
    spent = publication_spending(publication=publication)
    assert spent.approved_usd == Decimal(one) + Decimal("0.03")
