"""Admin pages and API of crowd work: publish with a cost preview, progress, review, the call log."""

import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import Bonus, HitStatus, Publication, PublicationStatus
from annotate.models import AssignmentStatus
from tests.annotate.crowd.conftest import (
    crowd_assignment,
    fake_publication,
    publish_form,
    published_on_fake,
    submitted_on_fake_platform,
)
from tests.factories import project_with_tasks

pytestmark = pytest.mark.django_db

FORM = publish_form()


def test_pages_are_for_admins_only(client, researcher, crowd_batch):
    urls = [
        reverse("crowd:publish", args=[crowd_batch.pk]),
        reverse("crowd:publication-list"),
        reverse("crowd:calls"),
    ]
    for url in urls:
        assert client.get(url).status_code == 302  # to the login page
    client.force_login(researcher)
    for url in urls:
        refused = client.get(url)
        assert refused.status_code == 403 and "This page is for admins." in refused.text
    api = client.post(reverse("crowd-api:preview", args=[crowd_batch.pk]), {"platform": "fake"})
    assert api.status_code == 404


def test_publish_shows_cost_and_balance_then_publishes_on_confirm(
    client, admin_user, crowd_batch, django_capture_on_commit_callbacks, settings
):
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    assert client.get(url).status_code == 200
    preview = client.post(url, {**FORM, "preview": "1"})
    assert 'id="cost-total">$10.80<' in preview.text
    assert "$10000.00" in preview.text
    assert not Publication.objects.exists()
    # A confirmation for another amount (the reward changed meanwhile) only shows the preview.
    stale = client.post(
        url, {**FORM, "reward_usd": "2.00", "confirm_total": "10.80", "publish": "1"}
    )
    assert stale.status_code == 200 and 'id="cost-total">$21.60<' in stale.text
    assert not Publication.objects.exists()
    assert "Nothing was published: the total is now $21.60, not the $10.80" in stale.text
    unconfirmed = client.post(url, {**FORM, "publish": "1"})
    assert "Nothing was published: confirm the total below, $10.80." in unconfirmed.text
    assert not Publication.objects.exists()
    # A press of Preview alone says nothing of the kind.
    assert "Nothing was published" not in client.post(url, {**FORM, "preview": "1"}).text
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(url, {**FORM, "confirm_total": "10.80", "publish": "1"})
    publication = Publication.objects.get()
    assert done["Location"] == reverse("crowd:publication", args=[publication.pk])
    assert publication.status == PublicationStatus.PUBLISHED
    assert publication.qualification_requirements[0]["IntegerValues"] == [90]
    page = client.get(done["Location"])
    assert 'id="progress-text">3 of 3<' in page.text
    assert len(FakePlatform.store.hits) == 3


@pytest.mark.parametrize(
    ("field", "value", "refusal"),
    [
        ("reward_usd", "0", "at least $0.01"),
        ("lifetime_hours", "9000", "less than or equal to 8760"),
        ("auto_approval_hours", "721", "less than or equal to 720"),
        ("assignment_minutes", "525601", "less than or equal to 525600"),
    ],
)
def test_settings_the_platform_refuses_are_refused_at_the_preview_beside_their_field(
    client, admin_user, crowd_batch, field, value, refusal
):
    """No total to confirm for settings publishing would refuse, and the typed values stay on
    the form (a refusal after "Confirm" used to show the form afresh, the values lost)."""
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    page = client.post(url, {**FORM, field: value, "title": "My own title", "preview": "1"})
    assert page.status_code == 200
    assert 'name="publish"' not in page.text and 'id="cost-total"' not in page.text
    errors = page.context["form"].errors
    assert refusal in " ".join(errors[field])
    assert 'value="My own title"' in page.text
    assert not Publication.objects.exists()


def test_publishing_on_the_offline_platform_still_works_after_it_starts_afresh(
    client, admin_user, crowd_batch, django_capture_on_commit_callbacks, settings
):
    """An offline platform started afresh (its state file deleted; before it was a file, every
    `make run`) numbers its HIT ids from 1 again. They collided with the HITs stored before:
    the next publish was a server error and left a publication stuck at "publishing"."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    other = project_with_tasks(instructions=2, systems=2, questions=1).batches.get()
    for n, batch in enumerate((crowd_batch, other)):
        if n:
            FakePlatform.reset()  # its state file deleted (a new var/): ids start again
        url = reverse("crowd:publish", args=[batch.pk])
        total = client.post(url, {**FORM, "preview": "1"}).context["preview"].total_usd
        with django_capture_on_commit_callbacks(execute=True):
            client.post(url, {**FORM, "confirm_total": str(total), "publish": "1"})
        assert Publication.objects.get(batch=batch).status == PublicationStatus.PUBLISHED


def test_review_page_approves_and_requires_feedback_to_reject(
    client, admin_user, crowd_batch, django_assert_max_num_queries
):
    publication = fake_publication(crowd_batch)
    tasks = list(crowd_batch.tasks.all())
    first = crowd_assignment(task=tasks[0], platform="fake", worker="W1")
    second = crowd_assignment(task=tasks[1], platform="fake", worker="W2")
    for assignment in (first, second):
        submitted_on_fake_platform(assignment, publication=publication)
    first.submission = {"labels": {"r2_q1": "no", "r1_q2": "unknown", "r1_q1": "yes"}}
    first.save()
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[publication.pk])
    with django_assert_max_num_queries(13):  # one more since the questions' texts are shown
        page = client.get(url)
    assert "W1" in page.text and "W2" in page.text
    # The worker's answers are on the page before anyone approves or rejects.
    answers = page.context["rows"][0].answers
    assert [q.by_system for q in answers.questions] == [
        [("System A", "YES"), ("System B", "NO")],
        [("System A", "UNKNOWN"), ("System B", "")],
    ]
    assert 'class="danger" data-confirm=' in page.text
    client.post(
        reverse("crowd:assignment-action", args=[first.pk]),
        {"action": "approve"},
        HTTP_REFERER=url,
    )
    refused = client.post(
        reverse("crowd:assignment-action", args=[second.pk]),
        {"action": "reject", "feedback": ""},
        HTTP_REFERER=url,
        follow=True,
    )
    assert "Say why you reject" in refused.text
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (AssignmentStatus.APPROVED, AssignmentStatus.SUBMITTED)


def test_paying_the_first_bonus_asks_first_as_every_later_one_does(client, admin_user, crowd_batch):
    """A bonus is paid at once and cannot be taken back (a typed "50" for "0.50" pays $62.50 with
    the fee): the first one's button asks before sending, not only "Pay another bonus"."""
    publication = fake_publication(crowd_batch)
    assignment = crowd_assignment(task=crowd_batch.tasks.first(), platform="fake", worker="W1")
    submitted_on_fake_platform(assignment, publication=publication)
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[publication.pk])
    client.post(
        reverse("crowd:assignment-action", args=[assignment.pk]),
        {"action": "approve"},
        HTTP_REFERER=url,
    )

    row = client.get(url).text.split(f'data-assignment="{assignment.pk}"')[1].split("</tr>")[0]

    button = row[row.index('<button name="action" value="bonus"') :].split(">", 1)[0]
    assert "Pay bonus" in row and "Pay another bonus" not in row
    assert 'data-confirm="Pay this bonus now?' in button


@pytest.mark.parametrize(
    ("fee_rate", "terms"),
    [
        (None, ('data-bonus-fee-rate="0.20"', 'data-bonus-fee-min="0.01"', '"MTurk fee"')),
        (
            Decimal("0.25"),
            ('data-bonus-fee-rate="0.250"', 'data-bonus-fee-min="0"', "25% platform"),
        ),
    ],
)
def test_the_bonus_button_carries_what_its_confirm_names_the_amount_fee_and_worker_by(
    client, admin_user, crowd_batch, fee_rate, terms
):
    """The confirm said "Pay this bonus now?" whatever was typed ($10,000 on a $0.40 task):
    site.js now asks "Pay a bonus of $X (+ $F MTurk fee) to worker W now?" from the button's
    fee terms (the publication's: MTurk's schedule, or its flat rate) and worker, the worker's
    id escaped as any attribute, and the field says the most a bonus may be."""
    publication = fake_publication(crowd_batch, fee_rate=fee_rate)
    assignment = crowd_assignment(task=crowd_batch.tasks.first(), platform="fake", worker='W"><b>1')
    submitted_on_fake_platform(assignment, publication=publication)
    assignment.status = AssignmentStatus.APPROVED
    assignment.save(update_fields=["status"])
    client.force_login(admin_user)
    row = _review_row(client.get(reverse("crowd:review", args=[publication.pk])).text, assignment)
    button = row[row.index('<button name="action" value="bonus"') :].split(">", 1)[0]
    assert 'data-bonus-worker="W&quot;&gt;&lt;b&gt;1"' in button
    assert all(term in button for term in terms), button
    assert "at most $20.00" in row


def _review_row(page_html: str, assignment) -> str:
    """The review table's row of `assignment`, up to the next row (its cells hold tables)."""
    return page_html.split(f'<tr data-assignment="{assignment.pk}">')[1].split("<tr data-")[0]


def test_the_review_page_shows_each_questions_text_beside_the_workers_answers_and_time_spent(
    client, admin_user, crowd_batch
):
    """A reviewer judges an assignment by what was asked and how long the worker took: the
    answers alone ("System A: YES NO") named no question, and the time was nowhere."""
    publication = fake_publication(crowd_batch)
    task = crowd_batch.tasks.order_by("position").first()
    questions = list(task.instruction.questions.order_by("position"))
    questions[0].text = "Is the answer in <b>French</b>?"
    questions[1].text = "Does it stay under 50 words?"
    for question in questions:
        question.save()
    quick = crowd_assignment(task=task, platform="fake", worker="W1")
    quick.claimed_at = quick.submitted_at - timedelta(minutes=12, seconds=5)
    quick.submission = {"labels": {"r1_q1": "yes", "r2_q1": "no", "r1_q2": "no", "r2_q2": "yes"}}
    quick.save()
    fast = crowd_assignment(task=crowd_batch.tasks.last(), platform="fake", worker="W2")
    fast.claimed_at = fast.submitted_at - timedelta(seconds=42)
    fast.save()
    client.force_login(admin_user)
    page = client.get(reverse("crowd:review", args=[publication.pk])).text
    row = _review_row(page, quick)
    assert re.findall(r"<(?:dt|dd)>(.*?)</(?:dt|dd)>", row) == [
        "1. Is the answer in &lt;b&gt;French&lt;/b&gt;?",
        "System A: YES · System B: NO",
        "2. Does it stay under 50 words?",
        "System A: NO · System B: YES",
    ]
    assert '<td class="time-spent">12 min 5 s</td>' in row
    assert '<td class="time-spent">42 s</td>' in _review_row(page, fast)


def test_the_review_pages_queries_do_not_grow_with_its_assignments(client, admin_user, crowd_batch):
    publication = fake_publication(crowd_batch)
    tasks = list(crowd_batch.tasks.order_by("position"))
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[publication.pk])
    counts = []
    for n, task in enumerate(tasks):
        for worker in (f"A{n}", f"B{n}"):
            assignment = crowd_assignment(task=task, platform="fake", worker=worker)
            assignment.submission = {"labels": {"r1_q1": "yes", "r1_q2": "no"}}
            assignment.save()
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[-1], counts  # 2, then 6 assignments


def _control_names(row_html: str) -> list[str]:
    """What a screen reader announces for each button and label of a review row."""
    controls = re.findall(r"<(button|label|summary)\b[^>]*>(.*?)</\1>", row_html, flags=re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", text).split()) for _, text in controls]


def test_each_review_rows_controls_name_the_worker_and_task(client, admin_user, crowd_batch):
    """Every row has the same buttons and fields: a screen reader moving from control to control
    must hear whose work an Approve, Reject, Block or feedback field is about."""
    publication = fake_publication(crowd_batch)
    tasks = list(crowd_batch.tasks.all())
    for task, worker in ((tasks[0], "W1"), (tasks[1], "W2")):
        submitted_on_fake_platform(
            crowd_assignment(task=task, platform="fake", worker=worker), publication=publication
        )
    client.force_login(admin_user)
    page = client.get(reverse("crowd:review", args=[publication.pk])).text
    rows = re.findall(r"<tr data-assignment=.*?</tr>", page, flags=re.S)
    assert len(rows) == 2
    for row, task, worker in ((rows[0], tasks[0], "W1"), (rows[1], tasks[1], "W2")):
        names = _control_names(row)
        task_id = task.instruction.external_id
        assert f"Approve {worker}'s work on {task_id}" in names
        assert f"Reject {worker}'s work on {task_id}" in names
        assert (
            f"Feedback to the worker on {worker}'s work on {task_id} (they read it on the platform)"
            in names
        )
        assert f"Block {worker}" in names and f"Reason to block {worker}" in names
        assert f"Message to {worker}" in names


def test_a_selfhosted_review_does_not_promise_the_participant_sees_the_feedback(
    client, admin_user, crowd_batch
):
    publication = fake_publication(crowd_batch, platform="selfhosted")
    assignment = crowd_assignment(
        task=crowd_batch.tasks.first(), platform="selfhosted", worker="P1"
    )
    client.force_login(admin_user)
    url = reverse("crowd:review", args=[publication.pk])
    page = client.get(url)
    assert "Feedback to the worker" not in page.text
    assert "the participant is not told here" in page.text
    refused = client.post(
        reverse("crowd:assignment-action", args=[assignment.pk]),
        {"action": "reject", "feedback": " "},
        HTTP_REFERER=url,
        follow=True,
    )
    assert "the worker sees the feedback" not in refused.text
    assert "reject the submission on the recruiting site too" in refused.text
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED


def test_api_publish_needs_the_previewed_total(client, admin_user, crowd_batch, settings):
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    preview = client.post(
        reverse("crowd-api:preview", args=[crowd_batch.pk]),
        {"platform": "fake", "reward_usd": "1.00"},
        content_type="application/json",
    ).json()
    assert preview["total_usd"] == "10.80" and preview["balance_usd"] == "10000.00"
    body = {"platform": "fake", "title": "t", "description": "d", "confirm_total_usd": "1.00"}
    refused = client.post(
        reverse("crowd-api:publish", args=[crowd_batch.pk]), body, content_type="application/json"
    )
    assert refused.status_code == 400 and "$10.80" in refused.json()["detail"]
    made = client.post(
        reverse("crowd-api:publish", args=[crowd_batch.pk]),
        {**body, "confirm_total_usd": "10.80"},
        content_type="application/json",
    )
    assert made.status_code == 201
    status = client.get(reverse("crowd-api:publication", args=[made.json()["id"]])).json()
    assert status["hits_total"] == 3


def test_call_log_shows_who_called_what(client, admin_user, crowd_batch):
    client.force_login(admin_user)
    client.post(reverse("crowd:publish", args=[crowd_batch.pk]), {**FORM, "preview": "1"})
    page = client.get(reverse("crowd:calls"))
    assert "account_balance" in page.text and "admin-user" in page.text
    api = client.get(reverse("crowd-api:calls")).json()
    assert api[0]["operation"] == "account_balance" and api[0]["user"] == "admin-user"


def test_api_approve_and_reject(client, admin_user, crowd_batch):
    tasks = list(crowd_batch.tasks.all())
    first = crowd_assignment(task=tasks[0], platform="fake", worker="W1")
    submitted_on_fake_platform(first, publication=fake_publication(crowd_batch))
    client.force_login(admin_user)
    refused = client.post(
        reverse("crowd-api:reject", args=[first.pk]), {}, content_type="application/json"
    )
    assert refused.status_code == 400
    done = client.post(
        reverse("crowd-api:approve", args=[first.pk]), {}, content_type="application/json"
    )
    assert done.json()["status"] == "approved"
    assert first.submitted_at <= timezone.now()
    # A bonus request retried with its token is the same bonus, paid once.
    body = {"amount_usd": "0.30", "feedback": "thanks", "request_token": "retry-token-0001"}
    for _ in range(2):
        paid = client.post(
            reverse("crowd-api:bonus", args=[first.pk]), body, content_type="application/json"
        )
        assert paid.json()["status"] == "paid"
    assert [b["amount"] for b in FakePlatform.store.bonuses] == [Decimal("0.30")]


def test_project_page_links_admins_to_publishing(client, admin_user, researcher, crowd_batch):
    """Admins publish a batch from the project page; a researcher, who cannot, is told that an
    admin does it (as on the human-study page), rather than left wondering how work reaches
    crowd workers."""
    project = crowd_batch.project
    project.researchers.add(researcher)
    publish_url = reverse("crowd:publish", args=[crowd_batch.pk])
    client.force_login(admin_user)
    page = client.get(reverse("work:project-detail", args=[project.pk])).text
    assert publish_url in page and 'id="crowd-publishing-note"' not in page
    client.force_login(researcher)
    page = client.get(reverse("work:project-detail", args=[project.pk]))
    assert page.status_code == 200 and publish_url not in page.text
    note = page.text.split('id="crowd-publishing-note">', 1)[1].split("</p>", 1)[0]
    assert "an admin publishes a batch to crowd workers" in note


def test_configured_worker_filter_reaches_mturk(
    client, admin_user, crowd_batch, mturk_settings, fake_mturk, django_capture_on_commit_callbacks
):
    mturk_settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    chosen = {
        **FORM,
        "platform": "mturk",
        "min_percent_approved": "95",
        "min_hits_approved": "1000",
        "locale": "gb",
    }
    preview = client.post(url, {**chosen, "preview": "1"})
    total = preview.text.split('id="cost-total">$', 1)[1].split("<", 1)[0]
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {**chosen, "confirm_total": total, "publish": "1"})
    (hit_type,) = fake_mturk.state.hit_types.values()
    assert {
        q["QualificationTypeId"]: (q["Comparator"], q.get("IntegerValues") or q["LocaleValues"])
        for q in hit_type["QualificationRequirements"]
    } == {
        "000000000000000000L0": ("GreaterThan", [95]),
        "00000000000000000040": ("GreaterThanOrEqualTo", [1000]),
        "00000000000000000071": ("EqualTo", [{"Country": "GB"}]),
    }
    assert len(fake_mturk.state.hits) == 3


@pytest.mark.parametrize(
    ("referer", "expected"),
    [
        ("https://evil.example.com/phish", None),
        ("//evil.example.com/phish", None),
        ("javascript:alert(1)", None),
        ("http://testserver/crowd/calls/", "http://testserver/crowd/calls/"),
        ("/crowd/calls/", "/crowd/calls/"),
        ("", None),
    ],
)
def test_actions_return_only_to_a_page_of_this_site(
    client, admin_user, crowd_batch, referer, expected
):
    task = crowd_batch.tasks.first()
    assignment = crowd_assignment(task=task, platform="fake", worker="W1")
    client.force_login(admin_user)
    for url, body in [
        (reverse("crowd:assignment-action", args=[assignment.pk]), {"action": "nonsense"}),
        (reverse("crowd:worker-action", args=[assignment.annotator_id]), {"action": "nonsense"}),
    ]:
        page = client.post(url, body, HTTP_REFERER=referer)
        assert page.status_code == 302
        assert page["Location"] == (expected or reverse("crowd:publication-list"))


@pytest.mark.parametrize(
    ("hit", "hours", "said"),
    [
        (None, str(10**30), "hours must be at most 8760"),
        ("abc", "1", "hit must be a whole number"),
        (None, "-2", "hours must be at least 1"),
    ],
)
def test_extending_a_hit_by_a_bad_value_is_refused_and_changes_nothing(
    client, admin_user, crowd_batch, hit, hours, said
):
    publication = fake_publication(crowd_batch)
    task = crowd_batch.tasks.first()
    submitted_on_fake_platform(crowd_assignment(task=task, platform="fake", worker="W1"),
                               publication=publication)  # fmt: skip
    stored = publication.hits.get()
    client.force_login(admin_user)
    body = {"action": "extend", "hit": hit or stored.pk, "hours": hours}
    page = client.post(
        reverse("crowd:publication-action", args=[publication.pk]), body, follow=True
    )
    assert page.status_code == 200 and said in page.text
    assert publication.hits.get().expires_at == stored.expires_at


def test_the_publication_page_offers_to_publish_again_only_the_hits_missing(
    client, admin_user, crowd_batch
):
    """ "Publish missing HITs again" (now Resume) on a publication with none missing asked
    admins to resume what needed nothing; its count (and cost) says what it would do."""
    publication = published_on_fake(crowd_batch)
    client.force_login(admin_user)
    url = reverse("crowd:publication", args=[publication.pk])
    assert 'value="publish"' not in client.get(url).text
    publication.hits.filter(pk=publication.hits.order_by("id").first().pk).update(
        status=HitStatus.FAILED, error="refused"
    )
    assert "Resume: publish the 1 missing HIT ($3.60)</button>" in client.get(url).text


def test_each_hits_extend_and_demo_controls_name_its_task(client, admin_user, crowd_batch):
    publication = published_on_fake(crowd_batch)
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    rows = re.findall(r"<tr><td>.*?</tr>", page, flags=re.S)
    tasks = [hit.task.instruction.external_id for hit in publication.hits.order_by("id")]
    assert len(rows) == len(tasks) == 3
    for row, task in zip(rows, tasks, strict=True):
        names = _control_names(row)
        assert f"hours to extend the HIT of {task} by" in names
        assert f"Extend the HIT of {task}" in names
        assert f"Do it as a worker on {task}" in names


def test_the_preview_warns_that_the_batch_is_published_on_another_platform(
    client, admin_user, crowd_batch
):
    """Publishing a batch on a second platform is allowed, but its workers race the first
    platform's for the same slots: the preview said nothing of the other publication."""
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    api = reverse("crowd-api:preview", args=[crowd_batch.pk])
    first = client.post(url, {**FORM, "platform": "selfhosted", "preview": "1"})
    assert first.status_code == 200 and 'id="published-elsewhere"' not in first.text
    fake_publication(crowd_batch)
    page = client.post(url, {**FORM, "platform": "selfhosted", "preview": "1"})
    warning = page.text.split('id="published-elsewhere"', 1)[1].split("</p>", 1)[0]
    assert f"Batch &#x27;{crowd_batch.name}&#x27; is already published on " in warning
    assert "share its tasks&#x27; slots" in warning and "race for the same claims" in warning
    reply = client.post(api, {"platform": "selfhosted"}, content_type="application/json").json()
    assert reply["published_elsewhere"] == ["fake"]
    assert "race for the same claims" in reply["published_elsewhere_note"]


def test_the_preview_names_only_another_platforms_publication_still_taking_workers(
    client, admin_user, crowd_batch
):
    """The race warning named publications that raced for nothing any more: one that failed
    (nothing published), one whose HITs had all ended, one whose link was closed."""
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])

    def warned() -> bool:
        page = client.post(url, {**FORM, "platform": "selfhosted", "preview": "1"})
        return 'id="published-elsewhere"' in page.text

    failed = fake_publication(crowd_batch, status=PublicationStatus.FAILED)
    assert not warned()
    failed.delete()
    live = published_on_fake(crowd_batch)
    assert warned()
    live.hits.update(expires_at=timezone.now() - timedelta(minutes=1))
    assert not warned()
    live.hits.filter(pk=live.hits.first().pk).update(expires_at=None)
    assert warned()
    live.hits.update(status=HitStatus.DELETED)
    assert not warned()
    link = fake_publication(crowd_batch, platform="mturk", link_token="other")
    assert warned()  # no HIT made yet: about to publish
    link.link_closed_at = timezone.now()
    link.save(update_fields=["link_closed_at"])
    assert not warned()


def _hit_only_rows(page: str) -> dict[str, bool]:
    """Each HIT-only setting's row on the publish page: whether it is rendered hidden."""
    rows = re.findall(r'<div class="form-row([^"]*)">\s*<label for="id_(\w+)"', page)
    return {name: "platform-hidden" in classes for classes, name in rows if "hit-only" in classes}


def test_a_selfhosted_link_hides_the_hit_only_settings_and_ignores_them(
    client, admin_user, crowd_batch, settings
):
    """The publish form showed MTurk's approval rate, approved HITs, qualifications,
    auto-approval and lifetime for a self-hosted link, on which they have no effect."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    settings_names = {
        "auto_approval_hours", "lifetime_hours", "min_percent_approved", "min_hits_approved",
        "locale", "qualifications_json",
    }  # fmt: skip
    shown = _hit_only_rows(client.get(url).text)  # the offline platform, chosen first
    assert shown == dict.fromkeys(settings_names, False)
    assert _hit_only_rows(client.post(url, {**FORM, "preview": "1"}).text) == shown
    link = publish_form("selfhosted", completion_code="C0DE")
    preview = client.post(url, {**link, "preview": "1"})
    assert _hit_only_rows(preview.text) == dict.fromkeys(settings_names, True)
    assert 'id="id_title"' in preview.text and 'id="id_assignment_minutes"' in preview.text
    # Values the browser kept from another platform, wrong for it, do not stop a link.
    wrong = {**link, "lifetime_hours": "0", "qualifications_json": "not json"}
    preview = client.post(url, {**wrong, "preview": "1"})
    assert 'id="cost-total">$9.00<' in preview.text and "Not JSON" not in preview.text
    assert "Not JSON" in client.post(url, {**FORM, "qualifications_json": "not json"}).text


def test_a_selfhosted_link_ignores_valid_hit_only_settings_left_from_mturk(
    client, admin_user, crowd_batch, settings
):
    """Qualifications naming MTurk's Masters, valid JSON left from MTurk's choice, passed the
    form and were refused by the publish's check for a link, above a form whose field the
    admin could not see; a lifetime left out (a disabled input sends nothing) is its default."""
    from annotate.crowd.base import MASTERS

    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    masters = json.dumps([{"QualificationTypeId": sorted(MASTERS)[0], "Comparator": "Exists"}])
    link = {**publish_form("selfhosted", completion_code="C0DE"), "qualifications_json": masters}
    link.pop("lifetime_hours", None)
    preview = client.post(url, {**link, "preview": "1"})
    assert 'id="cost-total">$9.00<' in preview.text
    assert "Masters" not in preview.text.split('id="cost-total"', 1)[0]


def test_a_links_preview_renders_the_hit_only_inputs_disabled_at_their_defaults(
    client, admin_user, crowd_batch, settings
):
    """site.js disables the hidden inputs (the browser sends none); the preview page rendered
    them enabled, empty and required, so a Confirm pressed before its deferred site.js ran was
    refused by the browser without a word. Rendered for the link: disabled, at their defaults."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    link = publish_form("selfhosted", completion_code="C0DE")
    for name in ("auto_approval_hours", "lifetime_hours", "min_percent_approved"):
        link.pop(name)
    link["min_hits_approved"] = ""
    preview = client.post(url, {**link, "preview": "1"}).text
    assert 'id="cost-total">$9.00<' in preview
    controls = re.findall(r'<(?:input|textarea)([^>]*id="id_(\w+)"[^>]*)>', preview)
    inputs = {name: attrs for attrs, name in controls}
    for name, default in [("auto_approval_hours", 72), ("lifetime_hours", 168),
                          ("min_percent_approved", 90), ("min_hits_approved", 500)]:  # fmt: skip
        assert f'value="{default}"' in inputs[name] and " disabled" in inputs[name], name
    assert " disabled" in inputs["locale"] and " disabled" in inputs["qualifications_json"]
    assert " disabled" not in inputs["assignment_minutes"] + inputs["confirm_total"]
    assert 'value="9.00"' in inputs["confirm_total"]  # the total to confirm is sent
    mturk = client.post(url, {**FORM, "preview": "1"}).text  # the platform's: all enabled
    hit_inputs = [tag for tag in re.findall(r"<input[^>]*>", mturk) if "id_completion_" not in tag]
    assert hit_inputs and " disabled" not in "".join(hit_inputs)


def test_a_hit_platform_hides_the_links_completion_settings_and_ignores_them(
    client, admin_user, crowd_batch, settings
):
    """The batch's publish form showed the self-hosted link's completion code and URL for
    MTurk and the offline platform too, and stored a code typed there on their publication,
    where nothing shows it. Hidden and disabled for a HIT's platform, as the HIT-only settings
    are for a link; shown and kept for the link."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])

    def completion_rows(page: str) -> dict[str, tuple[bool, bool]]:
        rows = re.findall(
            r'<div class="form-row([^"]*)">\s*<label for="id_(completion_\w+)".*?<input([^>]*)>',
            page,
            flags=re.S,
        )
        return {
            name: ("link-only" in classes and "platform-hidden" in classes, " disabled" in tag)
            for classes, name, tag in rows
        }

    names = ("completion_code", "completion_url")
    assert completion_rows(client.get(url).text) == dict.fromkeys(names, (True, True))
    typed = {**FORM, "completion_code": "C0DE", "completion_url": "https://x.example/done"}
    preview = client.post(url, {**typed, "preview": "1"}).text
    assert completion_rows(preview) == dict.fromkeys(names, (True, True))
    assert "C0DE" not in preview
    client.post(url, {**typed, "confirm_total": "10.80", "publish": "1"})
    hits_publication = Publication.objects.get(batch=crowd_batch, platform="fake")
    assert (hits_publication.completion_code, hits_publication.completion_url) == ("", "")
    link = publish_form("selfhosted", completion_code="L1NK")
    preview = client.post(url, {**link, "preview": "1"}).text
    assert completion_rows(preview) == dict.fromkeys(names, (False, False))
    assert 'value="L1NK"' in preview


def test_bonus_form_sent_again_says_nothing_more_was_paid(client, admin_user, crowd_batch):
    """The review page's bonus form sent a second time (Back, then a changed reason and amount,
    the page's request token unchanged) pays nothing more, and the admin is told so rather than
    "sent for payment" again, which read as a second bonus."""
    first = crowd_assignment(task=crowd_batch.tasks.first(), platform="fake", worker="W1")
    publication = fake_publication(crowd_batch)
    submitted_on_fake_platform(first, publication=publication)
    client.force_login(admin_user)
    url = reverse("crowd:assignment-action", args=[first.pk])
    review = reverse("crowd:review", args=[publication.pk])
    client.post(url, {"action": "approve", "feedback": ""}, HTTP_REFERER=review)
    form = {"action": "bonus", "amount": "0.30", "request_token": "review-page-token-01"}
    sent = client.post(url, {**form, "feedback": "careful work"}, HTTP_REFERER=review, follow=True)
    assert "Bonus of $0.30 sent for payment." in sent.text
    again = client.post(
        url, {**form, "amount": "0.50", "feedback": "again"}, HTTP_REFERER=review, follow=True
    )
    assert "sent for payment" not in again.text
    assert "This bonus form was sent before: the bonus of $0.30" in again.text
    assert "nothing more was paid now" in again.text
    assert list(Bonus.objects.filter(assignment=first).values_list("amount_usd", flat=True)) == [
        Decimal("0.30")
    ]
