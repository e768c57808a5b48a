"""A human study published to the crowd: the fake MTurk server over real HTTP (through boto3) and
self-hosted links. Only work the platform confirms counts; rejected answers and blocked workers
leave the report at once; forged workers count nowhere."""

import csv
import io
import re
import threading
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import selectors as crowd_selectors
from annotate.crowd.models import Bonus, Hit, PlatformAssignment, Publication, WorkerBlock
from annotate.crowd.services import publishing, replacements, review, workers
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import AnnotateError, PublishError
from annotate.models import Annotator, AssignmentStatus
from annotate.roles import ADMIN
from annotate.selectors.results import counted_human_answer_q, human_answer_statuses
from annotate.verbalizer.models import HumanAnswer, Prompt
from annotate.verbalizer.services import crowd
from annotate.verbalizer.services.humans import (
    HumanStudyError,
    human_answer_submit,
    human_study_create,
    human_work_next,
)
from annotate.verbalizer.services.sets import evaluation_set_create
from evaluation.verbalizer.report import human_answers_raw, verbalizer_report_cached
from tests.annotate.crowd.test_blocked_slots import (
    _block_held_open,
    _done_or_waiting_for_a_lock,
    _postgresql_only,
)
from tests.annotate.crowd.test_counted_work import _hand_back
from tests.annotate.verbalizer.helpers import fill
from tests.factories import AnnotatorFactory, UserFactory
from tests.threads import in_thread

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()  # SQLite reuses ids between tests: a report cached by another test may match
    yield
    cache.clear()


@pytest.fixture
def admin(db):
    return UserFactory(username="verb-admin", roles=[ADMIN])


@pytest.fixture
def study(db):
    """Flipped-golden direct prompts of SST-2 and RTE, items 1 (positive) and 2 (negative) each:
    4 prompts, 2 answers each. Under flipped golden key 1 ("the first word", standing for the
    positive label) is right on the positive items and key 2 on the negative ones."""
    fill("SST-2", [True, False])
    fill("RTE", [True, False], text_b="a hypothesis")
    evaluation_set = evaluation_set_create(
        name="crowd", datasets=["SST-2", "RTE"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    return human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=2)


@pytest.fixture
def on_mturk(mturk_settings, study):
    publication = crowd.study_publication_create(
        study=study,
        platform_name="mturk",
        chosen=PublishSettings(title="Pick a word", description="Keys 1 and 2"),
        base_url="https://annotate.example.org",
    )
    return publishing.publication_publish(publication_id=publication.pk, now=timezone.now())


def right_key(hit: Hit) -> int:
    return 1 if hit.prompt.item.is_positive else 2


def _open(client, fake_mturk, hit, worker, assignment_id):
    return client.get(
        reverse("verbalizer:crowd-mturk", args=[hit.unique_request_token]),
        {
            "assignmentId": assignment_id,
            "hitId": hit.hit_id,
            "workerId": worker,
            "turkSubmitTo": fake_mturk.url,
        },
    )


def answer_hit(client, fake_mturk, hit, worker, key, *, forged=False, hand_back=True):
    """What a worker does: accept on MTurk (a forger invents the id), open our page, press a
    key, and the done page hands the assignment back to MTurk (unless `hand_back` is False)."""
    assignment_id = (
        f"FORGED{worker}" if forged else fake_mturk.api.worker_accept(hit.hit_id, worker)
    )
    page = _open(client, fake_mturk, hit, worker, assignment_id)
    assert page.status_code == 200, page.content
    text = page.content.decode()
    assert hit.prompt.text.split("\n")[0].replace('"', "&quot;") in text  # the model's prompt
    action = re.search(r'<form method="post" action="([^"]+)" id="answer-form"', text).group(1)
    done = client.post(action, {"prompt": hit.prompt_id, "key": key, "seconds": "2.5"})
    assert done.status_code == 200 and b'id="external-submit"' in done.content
    if hand_back:
        _hand_back(fake_mturk, assignment_id, expect=400 if forged else 200)
    return assignment_id


def test_a_studys_hit_page_refuses_a_worker_id_mturk_never_gives(client, on_mturk, fake_mturk):
    """MTurk refuses any block or message naming such an id; the worker was stored all the
    same, and their answers took places."""
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()

    page = _open(client, fake_mturk, hit, "w-1", "3ASSIGNMENT1")

    assert page.status_code == 400
    assert "The workerId in this page" in page.text
    assert "is not one Amazon Mechanical Turk gives: nothing was taken." in page.text
    assert not Annotator.objects.filter(platform="mturk").exists()


def test_an_answer_under_a_real_assignment_of_a_hit_not_ours_never_counts(
    client, on_mturk, fake_mturk, admin
):
    """A worker holding a real assignment of someone else's HIT answers our HIT with it; MTurk
    takes the hand-back (the assignment is real) but lists it under no HIT of ours: the answer
    stays unconfirmed (so shown to the admin), counts in no result, cannot be approved, gives
    its place up at the sync, and its reject reaches nobody's assignment on the platform."""
    from tests.annotate.crowd.test_counted_work import _hit_not_ours

    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    theirs = fake_mturk.api.worker_accept(_hit_not_ours(fake_mturk), "AOTHER")
    page = _open(client, fake_mturk, hit, "AOTHER", theirs)
    assert page.status_code == 200, page.content
    action = re.search(r'<form method="post" action="([^"]+)" id="answer-form"', page.text)
    done = client.post(action.group(1), {"prompt": hit.prompt_id, "key": 1, "seconds": "2.5"})
    assert done.status_code == 200
    _hand_back(fake_mturk, theirs, expect=200)
    stray = HumanAnswer.objects.get(platform_assignment_id=theirs)

    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())

    stray.refresh_from_db()
    assert not PlatformAssignment.objects.filter(human_answer=stray).exists()
    assert crowd_selectors.reconciliation(publication=on_mturk).missing_on_platform == [stray]
    assert stray.place_released
    assert not HumanAnswer.objects.filter(counted_human_answer_q(), pk=stray.pk).exists()
    with pytest.raises(AnnotateError, match="has not confirmed"):
        review.human_answer_approve(answer_id=stray.pk, user=admin)
    review.human_answer_reject(answer_id=stray.pk, user=admin, feedback="not our HIT")
    assert fake_mturk.state.assignments[theirs]["AssignmentStatus"] == "Submitted"


def people(report, source="human"):
    return {
        (r["dataset"], r["mapping"]): (r["n"], r["accuracy_lenient"], r["invalid"])
        for r in report["rows"]
        if r["system"] == source
    }


def pooled(report, source):
    (row,) = [r for r in report["groups"] if r["system"] == source]
    return row["n"], row["accuracy_lenient"], row["invalid"]


def test_a_published_slice_counts_two_real_workers_and_no_forged_one(client, on_mturk, fake_mturk):
    hits = list(on_mturk.hits.select_related("prompt__item").order_by("id"))
    assert len(hits) == 4 and {h.status for h in hits} == {"created"}
    assert {fake_mturk.state.hits[h.hit_id]["MaxAssignments"] for h in hits} == {2}
    for hit in hits:
        answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))  # always right
        answer_hit(client, fake_mturk, hit, "AREAL2", 1)  # always the first word
    negative = next(h for h in hits if not h.prompt.item.is_positive)
    for n in range(5):  # the attack of issue 12: invented worker ids, all wrong
        answer_hit(client, fake_mturk, negative, f"AFAKE{n}", 1, forged=True)
    assert HumanAnswer.objects.filter(annotator__worker_id__startswith="AFAKE").count() == 5
    assert len(fake_mturk.state.refused_submits) == 5

    # A sync once the answers' hand-back grace is over: the forged ones are overdue.
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())
    assert PlatformAssignment.objects.filter(human_answer__isnull=False).count() == 8
    rec = crowd_selectors.reconciliation(publication=on_mturk)
    assert rec.missing_here == []
    assert {a.annotator.worker_id for a in rec.missing_on_platform} == {
        f"AFAKE{n}" for n in range(5)
    }
    report = verbalizer_report_cached(evaluation_set=on_mturk.human_study.evaluation_set)
    # AREAL1 4/4 right, AREAL2 right on the 2 positive items only: 6 of 8. The forged "key 1"
    # answers on the negative item would have made it 6 of 13.
    assert pooled(report, "human") == pooled(report, "human-crowd") == (8, 6 / 8, 0.0)
    # Majorities: the positive items agree (right); the negative ones tie 1-1 (invalid).
    assert pooled(report, "human-majority") == (4, 1.0, 0.5)
    assert "human-inhouse" not in {s["system"] for s in report["systems"]}
    # Fleiss over 4 prompts × 2 raters: (neg, pos) = (0, 2) twice and (1, 1) twice.
    # P_i = 1, 1, 0, 0 -> P̄ = 1/2; p_pos = 6/8, p_neg = 2/8 -> P_e = 10/16;
    # kappa = (1/2 - 10/16) / (6/16) = -1/3.
    overall = next(a for a in report["agreement"] if a["dataset"] == "all")
    assert (overall["source"], overall["items"], overall["raters"]) == ("human", 4, 2)
    assert overall["kappa"] == pytest.approx(-1 / 3)
    assert overall["ci_low"] <= overall["kappa"] <= overall["ci_high"]

    # A sixth forged worker is refused at the door: the HIT has its 2 confirmed workers.
    refused = _open(client, fake_mturk, negative, "AFAKE9", "FORGEDAFAKE9")
    assert refused.status_code == 409 and b"already has the 2 workers" in refused.content
    assert not Annotator.objects.filter(worker_id="AFAKE9").exists()  # no record left behind
    # The forged ones' own link now says plainly that their answer does not count.
    again = _open(client, fake_mturk, negative, "AFAKE0", "FORGEDAFAKE0")
    assert again.status_code == 403 and b"does not know assignment FORGEDAFAKE0" in again.content

    raw = list(csv.reader(io.StringIO("\n".join(",".join(map(str, r)) for r in human_answers_raw(
        evaluation_set=on_mturk.human_study.evaluation_set)))))  # fmt: skip
    header, rows = raw[0], raw[1:]
    status = {(r[header.index("annotator")], r[header.index("work_status")]) for r in rows}
    assert ("mturk:AFAKE3", "not confirmed by the platform") in status
    assert {s for a, s in status if a.startswith("mturk:AREAL")} == {"counted"}


def test_rejecting_a_worker_takes_their_answers_out_of_human_accuracy(
    client, on_mturk, fake_mturk, admin
):
    hits = list(on_mturk.hits.select_related("prompt__item").order_by("id"))
    for hit in hits:
        answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))
        answer_hit(client, fake_mturk, hit, "AREAL2", 1)
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now())
    evaluation_set = on_mturk.human_study.evaluation_set
    assert pooled(verbalizer_report_cached(evaluation_set=evaluation_set), "human")[:2] == (8, 0.75)

    for answer in HumanAnswer.objects.filter(annotator__worker_id="AREAL2"):
        review.human_answer_reject(answer_id=answer.pk, user=admin, feedback="pressed 1 always")
    rejected = [
        a for a in fake_mturk.state.assignments.values() if a["AssignmentStatus"] == "Rejected"
    ]
    assert {a["WorkerId"] for a in rejected} == {"AREAL2"} and len(rejected) == 4
    # The next read of the (cached) report no longer holds them: 4 of 4 right.
    report = verbalizer_report_cached(evaluation_set=evaluation_set)
    assert pooled(report, "human") == (4, 1.0, 0.0)
    assert pooled(report, "human-majority") == (4, 1.0, 0.0)
    overall = next(a for a in report["agreement"] if a["dataset"] == "all")
    assert overall["items"] == 0  # one rater per prompt left: no agreement to measure

    # Approving pays on MTurk and keeps counting; blocking the last worker empties the report.
    first = HumanAnswer.objects.filter(annotator__worker_id="AREAL1").first()
    review.human_answer_approve(answer_id=first.pk, user=admin)
    assert fake_mturk.state.assignments[first.platform_assignment_id]["AssignmentStatus"] == (
        "Approved"
    )
    assert pooled(verbalizer_report_cached(evaluation_set=evaluation_set), "human")[0] == 4
    review.worker_block(annotator_id=first.annotator_id, reason="test", user=admin)
    report = verbalizer_report_cached(evaluation_set=evaluation_set)
    assert "human" not in {s["system"] for s in report["systems"]}
    header, *rows = list(human_answers_raw(evaluation_set=evaluation_set))
    statuses = {row[header.index("work_status")] for row in rows}
    assert statuses == {"rejected", "worker blocked"}


def test_admin_pays_a_bonus_on_an_approved_answer_once(
    client, on_mturk, fake_mturk, admin, django_capture_on_commit_callbacks
):
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))
    answer = HumanAnswer.objects.get()
    client.force_login(admin)
    review_url = reverse("verbalizer:crowd-review", args=[on_mturk.pk])
    action = reverse("verbalizer:answer-action", args=[answer.pk])
    assert 'name="amount"' not in client.get(review_url).text  # submitted: decide first
    client.post(action, {"action": "approve"})
    page = client.get(review_url).text
    assert 'name="amount"' in page
    # The first bonus spends money too: it asks before sending, as every later one does.
    assert '<button name="action" value="bonus" data-confirm="Pay this bonus now?' in page
    # A bad amount or no reason is refused and pays nothing.
    back = {"follow": True, "HTTP_REFERER": review_url}
    refused = client.post(action, {"action": "bonus", "amount": "0.5x", "feedback": "f"}, **back)
    assert "such as 0.50" in refused.text
    refused = client.post(action, {"action": "bonus", "amount": "0.25", "feedback": " "}, **back)
    assert "reason for the bonus" in refused.text
    # Above CROWD_BONUS_MAX_USD ($20.00 by default) too, naming the field and the limit.
    assert "at most $20.00" in page
    with django_capture_on_commit_callbacks(execute=True):
        refused = client.post(
            action, {"action": "bonus", "amount": "10000", "feedback": "f"}, **back
        )
    assert "Bonus amount: $10,000.00 is more than the most one bonus may be, $20.00" in refused.text
    assert fake_mturk.state.bonuses == [] and not answer.bonuses.exists()
    # Paid through boto3 on the fake MTurk server, to this worker and assignment, once.
    with django_capture_on_commit_callbacks(execute=True):  # the page enqueues the payment
        client.post(action, {"action": "bonus", "amount": "0.25", "feedback": "careful"})
    (sent,) = fake_mturk.state.bonuses
    assert (sent["WorkerId"], sent["AssignmentId"], sent["BonusAmount"]) == (
        "AREAL1", answer.platform_assignment_id, "0.25",
    )  # fmt: skip
    bonus = answer.bonuses.get()
    assert bonus.status == "paid"
    review.bonus_pay(bonus_id=bonus.pk, user=admin, now=timezone.now())  # a retry
    assert len(fake_mturk.state.bonuses) == 1
    page = client.get(review_url).text
    assert "Bonus $0.25: paid" in page and "Pay another bonus" in page
    # One more bonus, on purpose; its form sent twice (a double click) pays it once.
    token = re.search(r'name="request_token" value="(\w+)"', page).group(1)
    form = {"action": "bonus", "amount": "0.10", "feedback": "more", "request_token": token}
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            client.post(action, form)
    assert [b["BonusAmount"] for b in fake_mturk.state.bonuses] == ["0.25", "0.10"]


def test_study_review_page_syncs_now_and_says_what_changed(client, on_mturk, fake_mturk, admin):
    """As on a batch's review page: an admin's CSRF-checked POST syncs at once and comes back to
    the study's review page with the same report of what moved."""
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))
    review_url = reverse("verbalizer:crowd-review", args=[on_mturk.pk])
    sync_url = reverse("crowd:review-sync", args=[on_mturk.pk])
    checked = Client(enforce_csrf_checks=True)
    checked.force_login(admin)
    page = checked.get(review_url).text
    form = re.search(r'<form method="post" action="([^"]+)" id="sync-now">', page)
    assert form and form.group(1) == sync_url and "Sync with the platform now" in page
    assert checked.post(sync_url).status_code == 403  # no CSRF token: nothing synced
    assert not on_mturk.hits.filter(synced_at__isnull=False).exists()

    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    done = checked.post(sync_url, {"csrfmiddlewaretoken": token}, follow=True)
    assert done.redirect_chain == [(review_url, 302)]
    assert [str(m) for m in done.context["messages"]] == [
        "Synced 4 HITs with Amazon Mechanical Turk (1 assignment listed there): "
        "1 newly confirmed by the platform."
    ]
    assert HumanAnswer.objects.get().platform_record is not None


def test_a_study_link_review_page_has_no_sync_button(client, link, admin):
    client.force_login(admin)
    page = client.get(reverse("verbalizer:crowd-review", args=[link.pk])).text
    assert 'id="sync-now"' not in page and "Sync with the platform now" not in page


def test_no_bonus_through_a_selfhosted_link(client, link, admin):
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    prompt_id = re.search(r'name="prompt" value="(\d+)"', client.get(work).text).group(1)
    client.post(work, {"prompt": prompt_id, "key": 1})
    answer = HumanAnswer.objects.get()
    with pytest.raises(AnnotateError, match="self-hosted link: pay on that site"):
        review.human_answer_bonus_create(
            answer_id=answer.pk, amount_usd=Decimal("0.25"), reason="thanks", user=admin
        )
    assert not Bonus.objects.exists()


def test_unconfirmed_work_waits_and_a_worker_answers_a_hit_once(client, on_mturk, fake_mturk):
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    assignment_id = answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))
    evaluation_set = on_mturk.human_study.evaluation_set
    # Handed back to MTurk but not synced yet: stored, not counted.
    assert HumanAnswer.objects.count() == 1
    assert verbalizer_report_cached(evaluation_set=evaluation_set)["agreement"] == []
    assert "human" not in {s["system"] for s in verbalizer_report_cached(
        evaluation_set=evaluation_set)["systems"]}  # fmt: skip
    # A reload of the same assignment shows the hand-back again; another accept is refused.
    reload = _open(client, fake_mturk, hit, "AREAL1", assignment_id)
    assert reload.status_code == 200 and b'id="external-submit"' in reload.content
    assert _open(client, fake_mturk, hit, "AREAL1", "ANOTHERONE").status_code == 409
    # Confirming one answer with GetAssignment (as a review does) lets it count.
    answer = HumanAnswer.objects.get()
    assert review.assignment_confirm(assignment=answer, now=timezone.now())
    assert pooled(verbalizer_report_cached(evaluation_set=evaluation_set), "human") == (1, 1.0, 0.0)


def test_a_worker_who_answered_a_prompt_in_another_study_is_refused_its_hit(
    client, on_mturk, fake_mturk
):
    """A prompt two studies share is a HIT of each: a worker who answered one is refused the
    other at the door (409, nothing stored), as a second accept of one HIT is; reports read
    one answer per person and prompt, so that answer would be paid and count nowhere."""
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))
    again = human_study_create(
        evaluation_set=on_mturk.human_study.evaluation_set, name="flip again", answers_per_prompt=2
    )
    publication = crowd.study_publication_create(
        study=again, platform_name="mturk",
        chosen=PublishSettings(title="Pick a word", description="Keys 1 and 2"),
        base_url="https://annotate.example.org",
    )  # fmt: skip
    publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    other = publication.hits.get(prompt=hit.prompt)
    assignment_id = fake_mturk.api.worker_accept(other.hit_id, "AREAL1")
    assert _open(client, fake_mturk, other, "AREAL1", assignment_id).status_code == 409
    assert not HumanAnswer.objects.filter(study=again).exists()


def test_in_house_and_crowd_people_are_told_apart(client, on_mturk, fake_mturk):
    hits = list(on_mturk.hits.select_related("prompt__item").order_by("id"))
    for hit in hits:
        answer_hit(client, fake_mturk, hit, "AREAL1", 1)  # right on the 2 positive items
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now())
    reader = AnnotatorFactory(name="reader", kind="expert")
    for hit in hits:
        human_answer_submit(
            study=on_mturk.human_study, prompt_id=hit.prompt_id, annotator=reader,
            key=right_key(hit), seconds=1.0,
        )  # fmt: skip
    report = verbalizer_report_cached(evaluation_set=on_mturk.human_study.evaluation_set)
    systems = [s["system"] for s in report["systems"]]
    assert systems == [
        "human", "human-majority", "human-inhouse", "human-inhouse-majority",
        "human-crowd", "human-crowd-majority",
    ]  # fmt: skip
    assert pooled(report, "human")[:2] == (8, 6 / 8)
    assert pooled(report, "human-inhouse")[:2] == (4, 1.0)
    assert pooled(report, "human-crowd")[:2] == (4, 0.5)
    agreement = {(a["source"], a["dataset"]): a for a in report["agreement"]}
    # One rater per prompt within each kind: nothing to agree on there.
    assert (
        agreement["human-inhouse", "all"]["items"] == agreement["human-crowd", "all"]["items"] == 0
    )
    # Together: the positive items agree (key 1), the negative ones split -> kappa -1/3 as above.
    assert agreement["human", "all"]["kappa"] == pytest.approx(-1 / 3)


def test_publishing_is_refused_twice_on_one_platform_and_for_a_closed_study(mturk_settings, study):
    preview = crowd.study_publication_preview(study=study, platform_name="mturk")
    # 4 prompts × 2 answers × ($0.05 + MTurk's fee: 20 % of it, also the $0.01 minimum)
    assert (preview.tasks, preview.assignments_per_task, preview.total_usd) == (
        4,
        2,
        Decimal("0.48"),
    )
    crowd.study_publication_create(
        study=study, platform_name="mturk",
        chosen=PublishSettings(title="t", description="d"), base_url="https://x.example",
    )  # fmt: skip
    with pytest.raises(PublishError, match="already published on Amazon Mechanical Turk"):
        crowd.study_publication_create(
            study=study, platform_name="mturk",
            chosen=PublishSettings(title="t", description="d"), base_url="https://x.example",
        )  # fmt: skip
    # Refused before a total is quoted (a quote the publish would then refuse).
    with pytest.raises(PublishError, match="already published on Amazon Mechanical Turk"):
        crowd.study_publication_preview(study=study, platform_name="mturk")
    # A self-hosted link: the rewards without a fee, paid on the recruiting site (was $0.00).
    linked = crowd.study_publication_preview(
        study=study, platform_name="selfhosted", reward_usd=Decimal("1.50")
    )
    assert (linked.total_usd, linked.fee_rate, linked.paid_outside) == (Decimal("12.00"), 0, True)


# --- Self-hosted links ----------------------------------------------------------------------


@pytest.fixture
def link(study, admin):
    publication = crowd.study_publication_create(
        study=study,
        platform_name="selfhosted",
        chosen=PublishSettings(title="Pick a word", description="Keys 1 and 2"),
        base_url="https://annotate.example.org",
    )
    publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    return publication


def _start(client, publication, **params):
    return client.post(reverse("verbalizer:crowd-link-join", args=[publication.link_token]), params)


def test_a_links_starts_are_limited_per_address(client, link, worker_rates):
    """Each start makes a participant: one address cannot make a study's answers its own."""
    worker_rates(starts="1/hour")
    assert _start(client, link, PROLIFIC_PID="P-1").status_code == 302
    refused = _start(client, link, PROLIFIC_PID="P-2")
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert not Annotator.objects.filter(worker_id="P-2").exists()


def test_a_study_links_review_does_not_promise_the_participant_sees_the_feedback(
    client, link, admin
):
    """The page asked for "Feedback to the worker" and the refusal said the worker sees it: a
    link has no channel back to its participants."""
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    prompt_id = re.search(r'name="prompt" value="(\d+)"', client.get(work).text).group(1)
    client.post(work, {"prompt": prompt_id, "key": 1})
    answer = HumanAnswer.objects.get()
    client.force_login(admin)
    page = client.get(reverse("verbalizer:crowd-review", args=[link.pk])).text
    assert "Feedback to the worker" not in page
    assert "Reason for the record (the participant is not told here)" in page
    with pytest.raises(AnnotateError, match="participant is not told") as refused:
        review.human_answer_reject(answer_id=answer.pk, user=admin, feedback=" ")
    assert "sees the feedback" not in str(refused.value)


def test_a_study_links_reject_keeps_its_reason_for_the_record(client, link, admin):
    """Only MTurk kept a reject's reason (RequesterFeedback); a link's participant is still not
    told, but the reason is on the answer, the review page and the set's human-answers.csv."""
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    prompt_id = re.search(r'name="prompt" value="(\d+)"', client.get(work).text).group(1)
    client.post(work, {"prompt": prompt_id, "key": 1})
    answer = HumanAnswer.objects.get()
    review.human_answer_reject(answer_id=answer.pk, user=admin, feedback="pressed at random")

    answer.refresh_from_db()
    assert (answer.status, answer.reject_reason) == ("rejected", "pressed at random")
    client.force_login(admin)
    page = client.get(reverse("verbalizer:crowd-review", args=[link.pk])).text
    assert "Reason given:</span> pressed at random" in page
    header, row = list(human_answers_raw(evaluation_set=link.human_study.evaluation_set))
    assert row[header.index("reject_reason")] == "pressed at random"


def test_an_mturk_answers_reject_keeps_the_feedback_the_worker_was_sent(
    client, on_mturk, fake_mturk, admin
):
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    assignment_id = answer_hit(client, fake_mturk, hit, "AREAL1", 1)
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now())
    answer = HumanAnswer.objects.get()
    review.human_answer_reject(answer_id=answer.pk, user=admin, feedback="pressed 1 always")

    answer.refresh_from_db()
    assert answer.reject_reason == "pressed 1 always"
    assert fake_mturk.state.assignments[assignment_id]["RequesterFeedback"] == "pressed 1 always"
    client.force_login(admin)
    listed = client.get(reverse("crowd-api:review", args=[on_mturk.pk])).json()
    assert [a["reject_reason"] for a in listed["answers"]] == ["pressed 1 always"]


def test_selfhosted_link_counts_without_a_platform_once_per_participant(client, link, admin):
    started = _start(client, link, PROLIFIC_PID="P-1")
    assert started.status_code == 302
    work = started["Location"]
    page = client.get(work).content.decode()
    prompt_id = int(re.search(r'name="prompt" value="(\d+)"', page).group(1))
    prompt = Prompt.objects.get(pk=prompt_id)
    assert prompt.text.split("\n")[0].replace('"', "&quot;") in page
    key = 1 if prompt.item.is_positive else 2
    assert client.post(work, {"prompt": prompt_id, "key": key, "seconds": "3"}).status_code == 302
    # The same answer again changes nothing; a different one is refused.
    assert client.post(work, {"prompt": prompt_id, "key": key}).status_code == 302
    assert client.post(work, {"prompt": prompt_id, "key": 3 - key}).status_code == 409
    answer = HumanAnswer.objects.get()
    assert (answer.annotator.worker_id, answer.seconds) == ("P-1", 3.0)
    assert "You answered 1 of 4." in client.get(work).content.decode()
    # No platform to confirm: it counts at once, as a crowd answer.
    report = verbalizer_report_cached(evaluation_set=link.human_study.evaluation_set)
    assert pooled(report, "human-crowd") == (1, 1.0, 0.0)
    # A rejection (recorded here only) takes it out.
    review.human_answer_reject(answer_id=answer.pk, user=admin, feedback="no")
    report = verbalizer_report_cached(evaluation_set=link.human_study.evaluation_set)
    assert "human" not in {s["system"] for s in report["systems"]}


def test_selfhosted_link_caps_anonymous_starts_and_closes(client, link, admin):
    review.publication_link_set(
        publication_id=link.pk, user=admin, closed=False, anonymous_starts_limit=2,
        now=timezone.now(),
    )  # fmt: skip
    # Each browser its own anonymous participant (one browser's second Start is the same one).
    assert _start(Client(), link).status_code == 302
    assert _start(Client(), link).status_code == 302
    third = _start(client, link)
    assert third.status_code == 410 and b"no more participants without an id" in third.content
    assert _start(client, link, PROLIFIC_PID="P-2").status_code == 302  # an id is always welcome
    review.publication_link_set(
        publication_id=link.pk, user=admin, closed=True, anonymous_starts_limit=2,
        now=timezone.now(),
    )  # fmt: skip
    closed = _start(client, link, PROLIFIC_PID="P-3")
    assert closed.status_code == 410 and b"This study is closed" in closed.content
    assert client.get(
        reverse("verbalizer:crowd-link-join", args=[link.link_token])
    ).status_code == (410)


def test_selfhosted_prompt_takes_no_more_answers_than_asked(client, link):
    prompt_id = link.human_study.prompts.order_by("id").first().pk
    for pid in ("P-1", "P-2", "P-3"):
        work = _start(client, link, PROLIFIC_PID=pid)["Location"]
        status = client.post(work, {"prompt": prompt_id, "key": 1}).status_code
        assert status == (302 if pid != "P-3" else 409)
    assert HumanAnswer.objects.filter(prompt_id=prompt_id).count() == 2
    # P-3 is offered the prompts that still need answers.
    page = client.get(work).content.decode()
    assert f'name="prompt" value="{prompt_id}"' not in page


def _answer_all(client, work: str) -> str:
    """Answer every prompt the link offers, as a participant pressing keys; the last page."""
    for _ in range(10):
        page = client.get(work)
        if page.status_code != 200:
            return page
        found = re.search(r'name="prompt" value="(\d+)"', page.content.decode())
        if found is None:
            return page
        assert client.post(work, {"prompt": found.group(1), "key": 1}).status_code == 302
    raise AssertionError("the link kept offering prompts")


def test_selfhosted_participant_done_gets_the_completion_code(client, link):
    study = link.human_study
    study.completion_code = "C0DE-42"
    study.save()
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    first = client.get(work).content.decode()
    assert "C0DE-42" not in first  # not before the work is done
    last = _answer_all(client, work).content.decode()
    assert 'id="all-done"' in last and "You answered 4 of 4." in last
    assert '<strong id="completion-code">C0DE-42</strong>' in last
    # Someone who finds every prompt answered by others did nothing and gets no code.
    for pid in ("P-2",):
        _answer_all(client, _start(client, link, PROLIFIC_PID=pid)["Location"])
    late = client.get(_start(client, link, PROLIFIC_PID="P-3")["Location"]).content.decode()
    assert 'id="all-done"' in late and "C0DE-42" not in late


def test_selfhosted_participant_done_goes_to_the_completion_url(client, link):
    study = link.human_study
    study.completion_url = "https://app.prolific.example/submissions/complete?cc=C0DE"
    study.save()
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    assert client.get(work).status_code == 200
    done = _answer_all(client, work)
    assert done.status_code == 302 and done["Location"] == study.completion_url
    assert HumanAnswer.objects.filter(annotator__worker_id="P-1").count() == 4


def test_study_completion_settings_are_checked(study):
    with pytest.raises(HumanStudyError, match="completion URL: 'javascript:alert\\(1\\)'"):
        human_study_create(
            evaluation_set=study.evaluation_set, name="bad", completion_url="javascript:alert(1)"
        )
    with pytest.raises(HumanStudyError, match="completion code: at most 100"):
        human_study_create(
            evaluation_set=study.evaluation_set, name="bad", completion_code="x" * 101
        )
    made = human_study_create(
        evaluation_set=study.evaluation_set, name="good", completion_code="ABC",
        completion_url="https://example.org/done",
    )  # fmt: skip
    assert (made.completion_code, made.completion_url) == ("ABC", "https://example.org/done")


def test_forged_link_token_opens_nothing(client, link):
    assert client.get(reverse("verbalizer:crowd-link-work", args=["forged"])).status_code == 404
    assert (
        client.post(
            reverse("verbalizer:crowd-mturk-answer", args=["forged"]), {"key": 1}
        ).status_code
        == 404
    )
    assert not Publication.objects.filter(link_token="nope").exists()
    assert client.get(reverse("verbalizer:crowd-link-join", args=["nope"])).status_code == 404


def test_verbalizer_publish_command_previews_then_publishes(study, settings, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.CROWD_PUBLIC_URL = ""
    with pytest.raises(CommandError) as error:  # no address to send workers to
        call_command("verbalizer_publish", "flip", "--platform", "fake", "--reward", "0.10",
                     "--confirm-total", "0.96")  # fmt: skip
    assert "set CROWD_PUBLIC_URL to the public https:// address, or give --base-url" in str(
        error.value
    )
    assert not Publication.objects.exists()
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    call_command("verbalizer_publish", "flip", "--platform", "fake", "--reward", "0.10")
    # 4 prompts × 2 answers × ($0.10 + 20 %)
    assert "= $0.96" in capsys.readouterr().out and not Publication.objects.exists()
    with pytest.raises(CommandError, match="the total is \\$0.96"):
        call_command("verbalizer_publish", "flip", "--platform", "fake", "--reward", "0.10",
                     "--confirm-total", "0.50")  # fmt: skip
    call_command("verbalizer_publish", "flip", "--platform", "fake", "--reward", "0.10",
                 "--confirm-total", "0.96")  # fmt: skip
    publication = Publication.objects.get(human_study=study)
    assert (publication.status, publication.hits.filter(status="created").count()) == (
        "published", 4,
    )  # fmt: skip
    with pytest.raises(CommandError, match="already published on Offline demo"):
        call_command("verbalizer_publish", "flip", "--platform", "fake", "--confirm-total", "0.50")


@pytest.mark.parametrize(
    ("reward", "platform", "total"),
    [("0.125", "fake", "1.25"), ("-1", "selfhosted", "-8.00"), ("NaN", "fake", "1.00")],
)
def test_verbalizer_publish_refuses_a_reward_that_is_not_dollars_and_cents(
    study, settings, reward, platform, total
):
    """The command takes any number: a total quoted at $0.125 an answer (the platform is sent
    "0.12"), a negative reward on a self-hosted link (a negative crowd cost in the report), or
    NaN (a traceback)."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    with pytest.raises(CommandError, match="reward"):
        call_command("verbalizer_publish", "flip", "--platform", platform, "--reward", reward,
                     "--confirm-total", total)  # fmt: skip
    assert not Publication.objects.exists()


def test_verbalizer_publish_lists_the_platforms_available_as_words(study, settings):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.CROWD_BACKEND = "fake"
    with pytest.raises(CommandError) as refused:
        call_command("verbalizer_publish", "flip", "--platform", "mturk")
    assert str(refused.value) == (
        "Platform 'mturk' is not available here; choose one of fake, selfhosted."
    )  # not "['fake', 'selfhosted']"
    assert not Publication.objects.exists()


def test_the_human_answers_file_names_crowd_workers_only_to_who_made_the_study(
    client, on_mturk, fake_mturk, admin
):
    """As the InFoBench labels export: a worker's platform id (mturk:AREAL1) is shown to admins
    and to the study's maker; any other researcher sees a stable pseudonym."""
    from annotate.models import Annotator
    from annotate.roles import RESEARCHER

    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))
    worker = Annotator.objects.get(name="mturk:AREAL1")
    study = on_mturk.human_study
    maker = UserFactory(username="study-maker", roles=[RESEARCHER])
    study.created_by = maker
    study.save(update_fields=["created_by"])
    other = UserFactory(username="other-researcher", roles=[RESEARCHER])
    url = reverse("verbalizer-reports:human-answers", args=[study.evaluation_set_id])

    def names(user) -> set[str]:
        client.force_login(user)
        body = b"".join(client.get(url).streaming_content).decode()
        rows = list(csv.DictReader(io.StringIO(body)))
        return {row["annotator"] for row in rows}

    assert names(admin) == names(maker) == {"mturk:AREAL1"}
    assert names(other) == {f"crowd-worker-{worker.pk}"}


def test_verbalizer_publish_command_says_what_a_self_hosted_link_costs_and_why_it_refuses(
    study, capsys
):
    """The docs' self-hosted example confirmed $0.00, refused with only "the total is $0.80";
    and the preview printed "balance: None" for a link paid on the recruiting site."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    call_command("verbalizer_publish", "flip", "--platform", "selfhosted")
    out = capsys.readouterr().out
    # 4 prompts × 2 answers × $0.05 (the default reward), no fee
    assert "= $0.40, paid on the recruiting site (no fee here)" in out and "None" not in out
    with pytest.raises(CommandError) as refused:
        call_command(
            "verbalizer_publish", "flip", "--platform", "selfhosted", "--confirm-total", "0.00"
        )
    assert str(refused.value) == (
        "not published: the total is $0.40, not the $0.00 given; publish with --confirm-total 0.40"
    )
    assert not Publication.objects.exists()


def test_a_rejected_answer_is_replaced_by_a_new_worker_on_the_same_hit(
    client, on_mturk, fake_mturk, admin
):
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))
    answer_hit(client, fake_mturk, hit, "AREAL2", 1)
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())
    bad = HumanAnswer.objects.get(annotator__worker_id="AREAL2", prompt=hit.prompt)
    review.human_answer_reject(answer_id=bad.pk, user=admin, feedback="pressed 1 always")
    with pytest.raises(ValueError, match="cannot be accepted"):
        fake_mturk.api.worker_accept(hit.hit_id, "AREAL3")
    plan = replacements.replacements_plan(
        publication_id=on_mturk.pk, now=timezone.now(), user=admin
    )
    mine = [(row.wanted, row.available, row.add) for row in plan.rows if row.hit.pk == hit.pk]
    assert mine == [(1, 0, 1)]
    replacements.replacements_create(
        publication_id=on_mturk.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin
    )
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 3
    answer_hit(client, fake_mturk, hit, "AREAL3", right_key(hit))  # admitted on our page too
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())
    counted = HumanAnswer.objects.filter(counted_human_answer_q(), prompt=hit.prompt)
    assert set(counted.values_list("annotator__worker_id", flat=True)) == {"AREAL1", "AREAL3"}


@pytest.mark.parametrize("second", ["accepted-on-mturk", "answered-here"])
def test_a_worker_who_holds_the_study_s_hit_is_not_paid_for_again(
    client, on_mturk, fake_mturk, admin, second
):
    """AREAL2's answer is rejected; AREAL1 holds the HIT's other assignment, accepted on MTurk
    (not here yet: MTurk still offers nothing, and no assignment is asked for in their place)
    or answered here (the hand-back not on MTurk yet: their answer counts, one is asked for)."""
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    answer_hit(client, fake_mturk, hit, "AREAL2", 1)
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())
    bad = HumanAnswer.objects.get(annotator__worker_id="AREAL2", prompt=hit.prompt)
    review.human_answer_reject(answer_id=bad.pk, user=admin, feedback="pressed 1 always")
    if second == "answered-here":
        answer_hit(Client(), fake_mturk, hit, "AREAL1", right_key(hit), hand_back=False)
    else:
        fake_mturk.api.worker_accept(hit.hit_id, "AREAL1")
    plan = replacements.replacements_plan(
        publication_id=on_mturk.pk, now=timezone.now(), user=admin
    )
    mine = [(row.wanted, row.available, row.unseen, row.add) for row in plan.rows if row.hit == hit]
    expected = (1, 0, 0, 1) if second == "answered-here" else (2, 0, 1, 1)
    assert mine == [expected]


def test_a_links_next_prompt_says_the_last_answer_was_saved_and_as_which_word(
    client, link, django_assert_num_queries
):
    """As the in-house page says it: the word rides signed in the next page's URL (a crowd
    worker has no session), so the page reads it with no query and no link can forge it."""
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    first = client.get(work)
    assert b'id="saved"' not in first.content
    prompt = first.context["prompt"]
    answered = client.post(work, {"prompt": prompt.pk, "key": 2})
    assert answered.status_code == 302 and answered["Location"].startswith(work + "?saved=")
    with django_assert_num_queries(len(_queries_of(client, work))):
        page = client.get(answered["Location"]).content.decode()
    saved = f"Saved: you answered “{prompt.negative_word}” to the last prompt."
    assert f'<p class="notice" role="status" id="saved">{saved}</p>' in page
    # Forged, or signed for another participant: no message.
    assert b'id="saved"' not in client.get(work, {"saved": "foo"}).content
    other = _start(client, link, PROLIFIC_PID="P-2")["Location"]
    signed = answered["Location"].split("?saved=")[1]
    assert b'id="saved"' not in client.get(other, {"saved": signed}).content


def _queries_of(client, url: str) -> list:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return captured.captured_queries


def test_a_hits_done_page_says_which_word_was_saved(client, on_mturk, fake_mturk):
    hit = on_mturk.hits.select_related("prompt").order_by("id").first()
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, "AREAL1")
    page = _open(client, fake_mturk, hit, "AREAL1", assignment_id).content.decode()
    action = re.search(r'<form method="post" action="([^"]+)" id="answer-form"', page).group(1)
    done = client.post(action, {"key": 1}).content.decode()
    saved = f"Saved: you answered “{hit.prompt.positive_word}” to the last prompt."
    assert f'<p class="notice" role="status" id="saved">{saved}</p>' in done


# --- Blocked workers ------------------------------------------------------------------------


def _answer(client, work: str, prompt_id: int, key: int = 1):
    return client.post(work, {"prompt": prompt_id, "key": key, "seconds": "2"})


def _worker(worker_id: str) -> int:
    return Annotator.objects.get(worker_id=worker_id).pk


def test_a_blocked_participants_answers_leave_the_report_and_free_their_places(client, link, admin):
    """A block takes the participant's answers out of every result at once (the raw file keeps
    them, `worker blocked`) and frees their places on the prompts, as a batch's blocked work
    frees its slots: the prompt is offered to another participant, and the study page shows
    the place free and the participant blocked. Before, a full prompt stayed full and the
    study ended with fewer counted answers than it asked for."""
    study = link.human_study
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    prompt = study.prompts.order_by("id").first()
    assert (
        _answer(client, work, prompt.pk, key=1 if prompt.item.is_positive else 2).status_code == 302
    )
    second = _start(client, link, PROLIFIC_PID="P-2")["Location"]
    assert _answer(client, second, prompt.pk).status_code == 302  # the prompt is full
    evaluation_set = study.evaluation_set

    def systems():
        report = verbalizer_report_cached(evaluation_set=evaluation_set)
        return {s["system"] for s in report["systems"]}

    assert "human" in systems()

    review.worker_block(annotator_id=_worker("P-1"), reason="bot", user=admin)
    blocked_answer = HumanAnswer.objects.get(annotator__worker_id="P-1")
    assert not HumanAnswer.objects.filter(counted_human_answer_q(), pk=blocked_answer.pk).exists()
    header, *rows = list(human_answers_raw(evaluation_set=evaluation_set))
    statuses = sorted(row[header.index("work_status")] for row in rows)
    assert statuses == ["counted", "worker blocked"]
    refused = _answer(client, work, study.prompts.order_by("id").last().pk)
    assert refused.status_code == 403
    newcomer = _start(client, link, PROLIFIC_PID="P-3")["Location"]
    for other in study.prompts.exclude(pk=prompt.pk):
        assert _answer(client, newcomer, other.pk).status_code == 302
    offered, _, _ = human_work_next(study=study, annotator=Annotator.objects.get(worker_id="P-3"))
    assert offered == prompt  # the place P-1's answer held

    client.force_login(admin)
    page = client.get(reverse("verbalizer:study-detail", args=[study.pk]))
    progress = page.context["progress"]
    assert progress.counts[prompt.pk]["selfhosted"] == 1  # the blocked answer fills no place
    assert prompt.pk in progress.needing
    rows = sorted((r.answers, r.blocked) for r in progress.annotators)
    assert rows == [(1, False), (1, True), (3, False)]  # P-2, P-1, P-3
    assert '<strong class="error">blocked</strong>' in page.content.decode()
    client.logout()

    assert _answer(client, newcomer, prompt.pk).status_code == 302
    assert HumanAnswer.objects.filter(counted_human_answer_q(), prompt=prompt).count() == 2
    assert HumanAnswer.objects.filter(prompt=prompt).count() == 3  # the blocked answer is kept


def test_an_unblock_gives_a_place_back_only_where_the_prompt_still_has_one(client, link, admin):
    """As a batch's unblocked work takes its slot back only where its task still has one: the
    answer whose prompt another participant filled meanwhile stays out (kept, counted nowhere,
    `late` in the raw file), the one whose prompt still has a place counts again; no prompt
    ever counts more than the study's answers per prompt."""
    study = link.human_study
    first, other = study.prompts.order_by("id")[:2]
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    assert _answer(client, work, first.pk).status_code == 302
    assert _answer(client, work, other.pk).status_code == 302
    second = _start(client, link, PROLIFIC_PID="P-2")["Location"]
    assert _answer(client, second, first.pk).status_code == 302
    review.worker_block(annotator_id=_worker("P-1"), reason="bot", user=admin)
    third = _start(client, link, PROLIFIC_PID="P-3")["Location"]
    assert _answer(client, third, first.pk).status_code == 302  # the place P-1 held

    done = review.worker_unblock(annotator_id=_worker("P-1"), user=admin)

    assert (done.restored, done.left_out) == (1, 1)
    counted = HumanAnswer.objects.filter(counted_human_answer_q())
    assert counted.filter(prompt=first).count() == 2
    assert not counted.filter(prompt=first, annotator__worker_id="P-1").exists()
    assert counted.filter(prompt=other, annotator__worker_id="P-1").exists()
    assert HumanAnswer.objects.filter(annotator__worker_id="P-1").count() == 2  # both kept
    fourth = _start(client, link, PROLIFIC_PID="P-4")["Location"]
    assert _answer(client, fourth, first.pk).status_code == 409  # full: P-2 and P-3


def _left_out_by_an_unblock(client, link, admin):
    """P-1 and P-2 fill the first prompt's two places; P-1 is blocked, P-3 takes the place, and
    the unblock leaves P-1's answer out. Return the prompt and the answers of P-1, P-2, P-3."""
    prompt = link.human_study.prompts.order_by("id").first()
    for participant in ("P-1", "P-2"):
        work = _start(client, link, PROLIFIC_PID=participant)["Location"]
        assert _answer(client, work, prompt.pk).status_code == 302
    review.worker_block(annotator_id=_worker("P-1"), reason="bot", user=admin)
    third = _start(client, link, PROLIFIC_PID="P-3")["Location"]
    assert _answer(client, third, prompt.pk).status_code == 302
    done = review.worker_unblock(annotator_id=_worker("P-1"), user=admin)
    assert (done.restored, done.left_out) == (0, 1)
    answers = [HumanAnswer.objects.get(annotator__worker_id=p) for p in ("P-1", "P-2", "P-3")]
    assert answers[0].place_released
    return prompt, answers


def _work_status(answer: HumanAnswer) -> str:
    """The answer's `work_status` in human-answers.csv."""
    return human_answer_statuses(HumanAnswer.objects.filter(pk=answer.pk))[answer.pk]


def test_a_left_out_link_answer_takes_the_place_a_reject_frees(client, link, admin):
    """As an MTurk answer left out takes the place a reject frees on its HIT: the self-hosted
    answer the unblock left out stayed out for good, and the prompt stayed one counted answer
    short of what the study asked for once another answer of it was rejected."""
    prompt, (left_out, second, _) = _left_out_by_an_unblock(client, link, admin)
    assert _work_status(left_out) == "late"  # not "not confirmed by the platform": it has none

    review.human_answer_reject(answer_id=second.pk, user=admin, feedback="no")

    left_out.refresh_from_db()
    assert not left_out.place_released
    counted = HumanAnswer.objects.filter(counted_human_answer_q(), prompt=prompt)
    assert sorted(counted.values_list("annotator__worker_id", flat=True)) == ["P-1", "P-3"]
    assert _work_status(left_out) == "counted"
    fourth = _start(client, link, PROLIFIC_PID="P-4")["Location"]
    assert _answer(client, fourth, prompt.pk).status_code == 409  # full again


def test_a_left_out_link_answer_takes_the_place_a_block_frees(client, link, admin):
    """The same when another participant's block frees the place, not a newcomer: the study
    page counts the prompt's two places held, and nobody new is let in."""
    prompt, (left_out, _, third) = _left_out_by_an_unblock(client, link, admin)

    review.worker_block(annotator_id=third.annotator_id, reason="bot", user=admin)

    left_out.refresh_from_db()
    assert not left_out.place_released
    counted = HumanAnswer.objects.filter(counted_human_answer_q(), prompt=prompt)
    assert sorted(counted.values_list("annotator__worker_id", flat=True)) == ["P-1", "P-2"]
    client.force_login(admin)
    progress = client.get(reverse("verbalizer:study-detail", args=[link.human_study.pk])).context[
        "progress"
    ]
    assert progress.counts[prompt.pk]["selfhosted"] == 2
    client.logout()
    fourth = _start(client, link, PROLIFIC_PID="P-4")["Location"]
    assert _answer(client, fourth, prompt.pk).status_code == 409


@pytest.mark.django_db(transaction=True)
def test_a_link_answer_while_the_block_commits_is_refused_and_leaves_the_place_free(
    client, link, admin, monkeypatch
):
    """The answer read the participant as not blocked before the block committed and was
    stored: counted nowhere, it still took one of the prompt's two places, and the link's third
    participant was refused it. The answer now reads the block after the participant's row
    lock, which the block holds until it commits."""
    _postgresql_only()
    prompt_id = link.human_study.prompts.order_by("id").first().pk
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    block, blocked, go = _block_held_open(monkeypatch, admin, _worker("P-1"))
    sent = []
    answer = in_thread(lambda: _answer(client, work, prompt_id), sent)
    _done_or_waiting_for_a_lock(answer)
    go.set()
    answer.join(30)
    block.join(30)

    assert not isinstance(blocked[0], Exception), blocked
    assert sent[0].status_code == 403, sent
    assert not HumanAnswer.objects.filter(annotator__worker_id="P-1").exists()
    for participant in ("P-2", "P-3"):  # the prompt's two places go to others
        other = _start(client, link, PROLIFIC_PID=participant)["Location"]
        assert _answer(client, other, prompt_id).status_code == 302, participant
    assert HumanAnswer.objects.filter(counted_human_answer_q(), prompt_id=prompt_id).count() == 2


@pytest.mark.django_db(transaction=True)
def test_an_mturk_answer_while_the_block_commits_is_refused(
    client, on_mturk, fake_mturk, admin, monkeypatch
):
    """The same on a study's HIT: the answer's admission takes the worker's row lock before it
    reads the block (workers.crowd_worker_get_or_create), in the answer's transaction."""
    _postgresql_only()
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, "AWORKER1")
    page = _open(client, fake_mturk, hit, "AWORKER1", assignment_id)
    assert page.status_code == 200, page.content
    action = re.search(
        r'<form method="post" action="([^"]+)" id="answer-form"', page.content.decode()
    ).group(1)
    block, blocked, go = _block_held_open(monkeypatch, admin, _worker("AWORKER1"))
    sent = []
    answer = in_thread(
        lambda: client.post(action, {"prompt": hit.prompt_id, "key": right_key(hit)}), sent
    )
    _done_or_waiting_for_a_lock(answer)
    go.set()
    answer.join(30)
    block.join(30)

    assert not isinstance(blocked[0], Exception), blocked
    assert sent[0].status_code == 403, sent
    assert not HumanAnswer.objects.exists()


def _answer_action(client, fake_mturk, hit, worker: str) -> str:
    """Accept the HIT on MTurk as `worker` and open our page: the answer form's address."""
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, worker)
    page = _open(client, fake_mturk, hit, worker, assignment_id)
    assert page.status_code == 200, page.content
    return re.search(
        r'<form method="post" action="([^"]+)" id="answer-form"', page.content.decode()
    ).group(1)


def _answer_held_before_its_store(monkeypatch, action: str, key: int):
    """Post the answer in a thread; return (thread, outcomes, go) once it is admitted and
    waits just before its store (the HIT's slot check) until `go` is set. Later answers pass."""
    reached, go, original = threading.Event(), threading.Event(), workers.worker_slot_check

    def held(**kwargs):
        if not reached.is_set():
            reached.set()
            go.wait(30)
        return original(**kwargs)

    monkeypatch.setattr(workers, "worker_slot_check", held)
    outcomes = []
    thread = in_thread(lambda: Client().post(action, {"key": key, "seconds": "2"}), outcomes)
    assert reached.wait(30)
    return thread, outcomes, go


@pytest.mark.django_db(transaction=True)
def test_an_mturk_answer_admitted_before_a_block_commits_is_stored_before_it(
    client, on_mturk, fake_mturk, admin, monkeypatch
):
    """The answer's admission read the worker as not blocked outside the answer's transaction:
    a block committing between it and the store let a blocked worker's answer in, and told
    them it was saved. The admission now holds the worker's row to the store, so the block
    waits for the answer and comes after it (the answer then counts nowhere, as any other)."""
    _postgresql_only()
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    action = _answer_action(client, fake_mturk, hit, "AWORKER1")
    answer, sent, go = _answer_held_before_its_store(monkeypatch, action, right_key(hit))
    blocked = []
    block = in_thread(
        lambda: review.worker_block(annotator_id=_worker("AWORKER1"), reason="bot", user=admin),
        blocked,
    )
    _done_or_waiting_for_a_lock(block)
    block_waited = block.is_alive()
    go.set()
    answer.join(30)
    block.join(30)

    assert not isinstance(blocked[0], Exception), blocked
    assert sent[0].status_code == 200 and b'id="external-submit"' in sent[0].content, sent
    stored = HumanAnswer.objects.get(annotator__worker_id="AWORKER1")
    block_made = WorkerBlock.objects.get(annotator_id=_worker("AWORKER1")).created_at
    assert stored.created_at < block_made, "a blocked worker's answer was stored and saved"
    assert block_waited, "the block committed between the answer's admission and its store"
    assert not HumanAnswer.objects.filter(counted_human_answer_q()).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("again", ["same key", "other key"])
def test_an_mturk_answer_sent_twice_at_once_is_stored_once(
    client, on_mturk, fake_mturk, monkeypatch, again
):
    """Two posts of one worker's answer at once (a double click, a second tab): the second
    waits for the first and reads its answer: the same word is the answer saved, another word
    is refused (answers cannot change); one answer is stored either way."""
    _postgresql_only()
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    action = _answer_action(client, fake_mturk, hit, "AWORKER1")
    key = right_key(hit)
    first, outcomes, go = _answer_held_before_its_store(monkeypatch, action, key)
    second_key = key if again == "same key" else 3 - key
    second = in_thread(lambda: Client().post(action, {"key": second_key}), outcomes)
    _done_or_waiting_for_a_lock(second)
    go.set()
    first.join(30)
    second.join(30)

    stored = HumanAnswer.objects.get(annotator__worker_id="AWORKER1")
    assert stored.word == (hit.prompt.positive_word if key == 1 else hit.prompt.negative_word)
    statuses = sorted(response.status_code for response in outcomes)
    if again == "same key":
        assert statuses == [200, 200], outcomes
        saved = f'id="saved">Saved: you answered “{stored.word}”'
        assert all(saved in r.content.decode() for r in outcomes), outcomes
    else:
        assert statuses == [200, 409], outcomes
        (refused,) = [r for r in outcomes if r.status_code == 409]
        assert "answers cannot change" in refused.content.decode()


@pytest.mark.parametrize("sandbox", [True, False])
def test_sandbox_answers_count_in_no_result_and_cost_nothing_even_after_going_live(
    client, mturk_settings, fake_mturk, study, admin, sandbox
):
    """A study published on MTurk's requester sandbox: its test workers' answers, confirmed by
    the sandbox and approved, count nowhere and cost nothing, also once MTURK_SANDBOX is false.
    The same answers on a production publication count and are paid (the control)."""
    mturk_settings.MTURK_SANDBOX = sandbox
    publication = crowd.study_publication_create(
        study=study,
        platform_name="mturk",
        chosen=PublishSettings(title="Pick a word", description="Keys 1 and 2"),
        base_url="https://annotate.example.org",
    )
    publication = publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    hits = list(publication.hits.select_related("prompt__item").order_by("id"))[:2]
    for hit in hits:
        answer_hit(client, fake_mturk, hit, "ATESTER1", right_key(hit))
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    first = HumanAnswer.objects.order_by("id").first()
    review.human_answer_approve(answer_id=first.pk, user=admin)
    evaluation_set = study.evaluation_set

    def seen() -> tuple:
        cache.clear()
        report = verbalizer_report_cached(evaluation_set=evaluation_set)
        header, *rows = list(human_answers_raw(evaluation_set=evaluation_set))
        return (
            HumanAnswer.objects.filter(counted_human_answer_q()).count(),
            "human" in {s["system"] for s in report["systems"]},
            crowd_selectors.publication_spending(publication=publication).total_usd,
            {row[header.index("work_status")] for row in rows},
        )

    before = seen()
    mturk_settings.MTURK_SANDBOX = False  # the site goes live
    after = seen()
    if sandbox:
        assert before == after == (0, False, Decimal("0.00"), {"sandbox test work"})
    else:  # two answers at $0.05, MTurk's 20% fee (HIT of 2): $0.06 each
        assert before == after == (2, True, Decimal("0.12"), {"counted"})


def test_a_sandbox_answer_is_test_work_in_the_raw_export_before_a_sync_too(
    client, mturk_settings, fake_mturk, study
):
    """The raw export read the sandbox from the platform's record only: a tester's answer on a
    sandbox HIT was "not confirmed by the platform" until a sync, as if a confirmation would
    count it. It is test work from the start, by the HIT it was given on."""
    mturk_settings.MTURK_SANDBOX = True
    publication = crowd.study_publication_create(
        study=study,
        platform_name="mturk",
        chosen=PublishSettings(title="Pick a word", description="Keys 1 and 2"),
        base_url="https://annotate.example.org",
    )
    publication = publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    hit = publication.hits.select_related("prompt__item").order_by("id").first()
    answer_hit(client, fake_mturk, hit, "ATESTER1", right_key(hit))

    def work_statuses() -> list[str]:
        header, *rows = list(human_answers_raw(evaluation_set=study.evaluation_set))
        return [row[header.index("work_status")] for row in rows]

    assert work_statuses() == ["sandbox test work"]
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert work_statuses() == ["sandbox test work"]


def test_a_released_answer_confirmed_after_its_place_was_filled_stays_out_until_one_frees(
    client, on_mturk, fake_mturk, admin, monkeypatch
):
    """ALATE's hand-back reached MTurk only after a sync released its place; a replacements
    plan that did not look at the HIT's assignments again (as before the plan synced released
    work first: test_replacements_released) paid for AREAL3, and the next sync gave ALATE its
    place back anyway: three answers counted for a prompt of two places per channel. ALATE's
    answer now stays out (kept, paid by MTurk, counted nowhere), as a batch's work confirmed
    after its task was filled does, until a place frees up."""
    monkeypatch.setattr(replacements, "hits_released_work_synced", lambda **kwargs: 0)
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    study = on_mturk.human_study
    answer_hit(client, fake_mturk, hit, "AREAL1", right_key(hit))
    late = answer_hit(Client(), fake_mturk, hit, "ALATE", right_key(hit), hand_back=False)
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())
    assert HumanAnswer.objects.get(annotator__worker_id="ALATE").place_released
    _hand_back(fake_mturk, late, expect=200)  # arrives after the sync
    plan = replacements.replacements_plan(
        publication_id=on_mturk.pk, now=timezone.now(), user=admin
    )
    replacements.replacements_create(
        publication_id=on_mturk.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin
    )
    answer_hit(Client(), fake_mturk, hit, "AREAL3", right_key(hit))
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())

    def counted() -> set[str]:
        answers = HumanAnswer.objects.filter(counted_human_answer_q(), prompt=hit.prompt)
        return set(answers.values_list("annotator__worker_id", flat=True))

    def statuses() -> dict[str, str]:
        header, *rows = list(human_answers_raw(evaluation_set=study.evaluation_set))
        return {
            row[header.index("annotator")]: row[header.index("work_status")]
            for row in rows
            if row[header.index("prompt")] == hit.prompt_id
        }

    assert counted() == {"AREAL1", "AREAL3"} and study.answers_per_prompt == 2
    assert statuses()["mturk:ALATE"] == "late"
    # MTurk confirmed it: it is paid (three answers at $0.05, MTurk's 20 % on a HIT of 3).
    assert crowd_selectors.publication_spending(publication=on_mturk).total_usd == Decimal("0.18")
    # A place frees up (AREAL3's answer rejected): the confirmed answer kept out takes it.
    rejected = HumanAnswer.objects.get(annotator__worker_id="AREAL3")
    review.human_answer_reject(answer_id=rejected.pk, user=admin, feedback="pressed at random")
    assert counted() == {"AREAL1", "ALATE"}
    assert statuses()["mturk:ALATE"] == "counted"


def test_the_admin_cannot_delete_answers_out_of_the_report(client, link, admin_user):
    """A participant's answer is a record the report counts, as an assignment holding work is:
    deleting their study in the admin took every answer of it out of human accuracy with it
    (HumanAnswer.study cascades), and an answer could be deleted on its own. The admin says
    what holds them and deletes nothing."""
    work = _start(client, link, PROLIFIC_PID="P-1")["Location"]
    page = client.get(work).content.decode()
    prompt = Prompt.objects.get(pk=int(re.search(r'name="prompt" value="(\d+)"', page).group(1)))
    key = 1 if prompt.item.is_positive else 2
    assert client.post(work, {"prompt": prompt.pk, "key": key}).status_code == 302
    evaluation_set = link.human_study.evaluation_set
    assert pooled(verbalizer_report_cached(evaluation_set=evaluation_set), "human-crowd") == (
        1, 1.0, 0.0,
    )  # fmt: skip
    answer = HumanAnswer.objects.get()
    admin_user.is_superuser = True
    admin_user.save()
    staff = Client()
    staff.force_login(admin_user)

    for url in (
        f"/admin/verbalizer/humanstudy/{link.human_study_id}/delete/",
        f"/admin/verbalizer/humananswer/{answer.pk}/delete/",
    ):
        staff.post(url, {"post": "yes"})

    assert HumanAnswer.objects.filter(pk=answer.pk).exists()
    assert pooled(verbalizer_report_cached(evaluation_set=evaluation_set), "human-crowd") == (
        1, 1.0, 0.0,
    )  # fmt: skip
    refusal = staff.get(f"/admin/verbalizer/humanstudy/{link.human_study_id}/delete/").text
    assert "1 answer" in refusal


def _answer_form(page) -> str:
    assert page.status_code == 200, page.content
    return re.search(
        r'<form method="post" action="([^"]+)" id="answer-form"', page.content.decode()
    ).group(1)


@pytest.mark.parametrize("honest_opens", ["before the forger", "after the forger answered"])
def test_a_forged_answer_under_a_workers_assignment_id_does_not_refuse_their_own(
    on_mturk, fake_mturk, admin, honest_opens
):
    """Someone who knows an honest worker's assignment id answers that worker's HIT with it
    under a worker id of their own before the worker submits. The worker's own answer was
    refused ("Assignment … has answered already": one answer per assignment id), though the
    platform confirms the assignment for them only: they lost the HIT. The answer is the
    worker's, as a batch's work is (an assignment id is what the worker's page says, confirmed
    by the platform for that worker and HIT): both are kept, the honest one counts once the
    platform confirms it, the forged copy never counts and gives its place up."""
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    honest, forger = Client(), Client()
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, "AREAL1")
    if honest_opens == "before the forger":
        action = _answer_form(_open(honest, fake_mturk, hit, "AREAL1", assignment_id))
    forged_action = _answer_form(_open(forger, fake_mturk, hit, "ATHIEF", assignment_id))
    assert forger.post(forged_action, {"key": 3 - right_key(hit)}).status_code == 200
    if honest_opens != "before the forger":
        action = _answer_form(_open(honest, fake_mturk, hit, "AREAL1", assignment_id))

    done = honest.post(action, {"key": right_key(hit), "seconds": "2"})
    assert done.status_code == 200, done.content
    assert f'name="assignmentId" value="{assignment_id}"' in done.content.decode()
    _hand_back(fake_mturk, assignment_id, expect=200)
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())

    right_word = hit.prompt.positive_word if right_key(hit) == 1 else hit.prompt.negative_word
    counted = HumanAnswer.objects.filter(counted_human_answer_q())
    assert [(a.annotator.worker_id, a.word) for a in counted] == [("AREAL1", right_word)]
    # The forged copy is kept, unconfirmed, and holds no place of the prompt.
    held = HumanAnswer.objects.filter(place_released=False)
    assert [a.annotator.worker_id for a in held] == ["AREAL1"]
    thief = HumanAnswer.objects.get(annotator__worker_id="ATHIEF")
    assert crowd_selectors.assignment_confirmation(assignment=thief) == "unknown to the platform"
    # Rejecting the forged copy is recorded here only: the worker's assignment stays theirs.
    review.human_answer_reject(answer_id=thief.pk, user=admin, feedback="forged")
    assert fake_mturk.state.assignments[assignment_id]["AssignmentStatus"] == "Submitted"
    report = verbalizer_report_cached(evaluation_set=on_mturk.human_study.evaluation_set)
    assert pooled(report, "human") == (1, 1.0, 0.0)
    # Now that the platform has the assignment for its worker, the id is refused to anyone else.
    again = _open(Client(), fake_mturk, hit, "ATHIEF2", assignment_id)
    assert again.status_code == 403 and b"for another worker or HIT" in again.content


@pytest.mark.django_db(transaction=True)
def test_a_forged_answer_stored_while_the_worker_answers_does_not_refuse_theirs(
    on_mturk, fake_mturk, monkeypatch
):
    """The same at once: the forger's answer under the worker's assignment id holds the HIT's
    lock when the worker's answer comes; the worker's waits for it and is stored after it."""
    _postgresql_only()
    hit = on_mturk.hits.select_related("prompt__item").order_by("id").first()
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, "AREAL1")
    action = _answer_form(_open(Client(), fake_mturk, hit, "AREAL1", assignment_id))
    forged_action = _answer_form(_open(Client(), fake_mturk, hit, "ATHIEF", assignment_id))
    forged, outcomes, go = _answer_held_before_its_store(monkeypatch, forged_action, 1)
    sent = []
    honest = in_thread(lambda: Client().post(action, {"key": right_key(hit)}), sent)
    _done_or_waiting_for_a_lock(honest)
    go.set()
    forged.join(30)
    honest.join(30)

    assert outcomes[0].status_code == 200, outcomes
    assert sent[0].status_code == 200 and b'id="external-submit"' in sent[0].content, sent
    workers_of_the_id = HumanAnswer.objects.filter(platform_assignment_id=assignment_id)
    assert sorted(workers_of_the_id.values_list("annotator__worker_id", flat=True)) == [
        "AREAL1", "ATHIEF",
    ]  # fmt: skip


@pytest.mark.parametrize("approve_tried", [True, False])
def test_a_verdict_on_a_forged_answer_on_another_hit_leaves_the_workers_record_alone(
    on_mturk, fake_mturk, admin, approve_tried
):
    """A forger opens another prompt's HIT with an honest worker's assignment id before any sync
    stored it, and answers. Rejecting (or trying to approve) the forged answer asked MTurk about
    the id, got the honest worker's assignment on their own HIT back, and stored it under the
    forger's HIT, unlinked: the honest answer left the report and the cost, and its page
    refused the worker. A confirmation of one answer never moves a record of another HIT."""
    first, second = on_mturk.hits.select_related("prompt__item").order_by("id")[:2]
    evaluation_set = on_mturk.human_study.evaluation_set
    assignment_id = fake_mturk.api.worker_accept(first.hit_id, "AREAL1")
    forger = Client()
    forged_action = _answer_form(_open(forger, fake_mturk, second, "ATHIEF", assignment_id))
    assert forger.post(forged_action, {"key": 1}).status_code == 200
    honest = Client()
    action = _answer_form(_open(honest, fake_mturk, first, "AREAL1", assignment_id))
    assert honest.post(action, {"key": right_key(first), "seconds": "2"}).status_code == 200
    _hand_back(fake_mturk, assignment_id, expect=200)
    review.publication_sync(publication_id=on_mturk.pk, now=timezone.now() + review.release_grace())
    mine = HumanAnswer.objects.get(annotator__worker_id="AREAL1")
    thief = HumanAnswer.objects.get(annotator__worker_id="ATHIEF")
    record = {"hit": first.pk, "human_answer": mine.pk, "worker_id": "AREAL1"}

    def record_of_the_id():
        row = PlatformAssignment.objects.get(platform_assignment_id=assignment_id)
        return {"hit": row.hit_id, "human_answer": row.human_answer_id, "worker_id": row.worker_id}

    def honest_answer_counts():
        cache.clear()
        assert record_of_the_id() == record
        assert list(HumanAnswer.objects.filter(counted_human_answer_q())) == [mine]
        report = verbalizer_report_cached(evaluation_set=evaluation_set)
        assert pooled(report, "human") == (1, 1.0, 0.0)
        reload = _open(honest, fake_mturk, first, "AREAL1", assignment_id)
        assert reload.status_code == 200 and b'id="external-submit"' in reload.content

    honest_answer_counts()
    if approve_tried:
        with pytest.raises(AnnotateError, match="has not confirmed"):
            review.human_answer_approve(answer_id=thief.pk, user=admin)
        honest_answer_counts()
    review.human_answer_reject(answer_id=thief.pk, user=admin, feedback="forged")
    honest_answer_counts()
    assert fake_mturk.state.assignments[assignment_id]["AssignmentStatus"] == "Submitted"
    thief.refresh_from_db()
    assert thief.status == AssignmentStatus.REJECTED
