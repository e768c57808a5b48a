"""Self-hosted study links: one submission per participant id per task, a cap on anonymous starts,
a link an admin can close (page and API); and the MTurk preview shuffles the systems."""

import re

import pytest
from django.core import signing
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.services import publishing
from annotate.crowd.services.publishing import PublishSettings
from annotate.crowd.services.workers import ANONYMOUS_COOKIE_SALT, assignment_token
from annotate.models import Annotator, Assignment, Label
from annotate.roles import ADMIN
from annotate.selectors.work import task_page_preview
from annotate.services.assignments import display_order_for
from annotate.services.projects import InstructionSelection, project_create
from tests.annotate.crowd.conftest import publish_form
from tests.factories import SystemFactory, UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(db):
    return UserFactory(username="link-admin", roles=[ADMIN], is_staff=True)


def _study(project, batch=None):
    return publishing.publication_create(
        batch=batch or project.batches.get(),
        platform_name="selfhosted",
        chosen=PublishSettings(title="A study", description="d"),
        base_url="https://annotate.example.org",
    )


@pytest.fixture
def study(db):
    project = project_with_tasks(instructions=2, systems=2, questions=1, assignments_per_task=5)
    return _study(project)


def _join_url(study):
    return reverse("crowd:selfhosted-join", args=[study.link_token])


def _start(client, study, **params):
    return client.post(_join_url(study), params)


def _finish(client, started, value="yes"):
    page = client.get(started["Location"]).text
    answers = {name: value for name in set(re.findall(r'name="(r\d+_q\d+)"', page))}
    return client.post(started["Location"], answers)


def test_one_submission_per_participant_id_per_task(client, study):
    project = study.batch.project
    for _ in range(2):
        assert _finish(client, _start(client, study, PROLIFIC_PID="P1")).status_code == 200
    assert _start(client, study, PROLIFIC_PID="P1").status_code == 404  # no task left
    # The same id under the other parameter name, and on a second link of the same instructions.
    assert _start(client, study, workerId="P1").status_code == 404
    other = project_create(
        name="same instructions",
        benchmark=project.benchmark,
        systems=list(project.systems.all()),
        selection=InstructionSelection(),
    )
    assert _start(client, _study(other), PROLIFIC_PID="P1").status_code == 404
    assert Assignment.objects.filter(annotator__worker_id="P1").count() == 2
    # A second submit of the same task with other answers changes nothing.
    first = Assignment.objects.filter(annotator__worker_id="P1").first()
    labels = sorted(Label.objects.filter(assignment=first).values_list("value", flat=True))
    token_url = reverse("crowd:work-task", args=[assignment_token(assignment=first)])
    again = client.post(token_url, {k: "no" for k in (first.submission or {}).get("labels", {})})
    assert again.status_code == 409
    assert sorted(Label.objects.filter(assignment=first).values_list("value", flat=True)) == labels


def test_anonymous_starts_are_capped_per_link(client, study, admin, settings):
    settings.CROWD_ANONYMOUS_STARTS_PER_LINK = 2
    assert _start(Client(), study).status_code == 302  # each browser its own participant
    assert _start(Client(), study).status_code == 302
    refused = _start(client, study)
    assert refused.status_code == 410 and "no more participants without an id" in refused.text
    assert Assignment.objects.count() == 2
    # A participant with an id still gets in; the link's own limit overrides the setting.
    assert _start(client, study, PROLIFIC_PID="P9").status_code == 302
    client.force_login(admin)
    api = reverse("crowd-api:link", args=[study.pk])
    reply = client.post(api, {"closed": False, "anonymous_starts_limit": 3}, "application/json")
    assert reply.status_code == 200 and reply.json()["anonymous_starts_limit"] == 3
    client.logout()
    assert _start(Client(), study).status_code == 302
    assert _start(Client(), study).status_code == 410
    assert Annotator.objects.filter(worker_id__startswith="anon-").count() == 3


def test_start_pressed_twice_without_an_id_is_one_participant_of_that_browser(client, study):
    """A double click on Start (or back, then Start again) on a link opened without a
    participant id made two participants: two slots taken, two raters in agreement."""
    first, again = _start(client, study), _start(client, study)
    assert (first.status_code, again.status_code) == (302, 302)
    assert again["Location"].split(":")[0] == first["Location"].split(":")[0]  # the same task
    assert Annotator.objects.filter(worker_id__startswith="anon-").count() == 1
    assert Assignment.objects.count() == 1
    # Their next task after a submit is that participant's too, and the join page knows them.
    assert _finish(client, first).status_code == 200
    assert _start(client, study).status_code == 302
    assert Assignment.objects.values("annotator").distinct().count() == 1
    assert Assignment.objects.count() == 2
    # Another browser is another participant.
    assert _start(Client(), study).status_code == 302
    assert Annotator.objects.filter(worker_id__startswith="anon-").count() == 2
    assert Assignment.objects.count() == 3


def test_a_browsers_participant_cookie_is_signed_and_of_its_own_link(client, study):
    """A cookie not signed by us, or signed for another link, names nobody here."""
    name = f"crowd_participant_{study.pk}"
    elsewhere = signing.dumps(
        {"p": study.pk + 1, "w": "anon-elsewhere"}, salt=ANONYMOUS_COOKIE_SALT
    )
    for value in ("anon-forged", elsewhere):
        client.cookies[name] = value
        assert _start(client, study).status_code == 302
    assert Annotator.objects.filter(worker_id__startswith="anon-").count() == 2
    assert not Annotator.objects.filter(worker_id__in=["anon-forged", "anon-elsewhere"]).exists()


def test_an_anonymous_looking_id_sent_with_a_start_is_never_kept_in_the_browser(client, study):
    """A link someone else made (or a form posted from another site) sends workerId=anon-…: the
    browser's later Starts without an id were all that sender's participant for 14 days."""
    sent = _start(client, study, workerId="anon-chosen-by-someone-else")
    assert sent.status_code == 302
    assert f"crowd_participant_{study.pk}" not in sent.cookies
    assert _start(client, study).status_code == 302
    assert Annotator.objects.filter(worker_id__startswith="anon-").count() == 2


def test_a_closed_link_takes_nobody_new_but_keeps_started_work(client, study, admin):
    started = _start(client, study, PROLIFIC_PID="P1")
    client.force_login(admin)
    page_action = reverse("crowd:publication-action", args=[study.pk])
    assert client.post(page_action, {"action": "close-link"}).status_code == 302
    detail = client.get(reverse("crowd:publication", args=[study.pk])).text
    assert "The link is <strong>closed</strong>" in detail
    client.logout()
    landing = client.get(_join_url(study))
    assert landing.status_code == 410 and "This study is closed" in landing.text
    assert _start(client, study, PROLIFIC_PID="P2").status_code == 410
    assert not Assignment.objects.filter(annotator__worker_id="P2").exists()
    assert _finish(client, started).status_code == 200  # accepted work is never lost
    client.force_login(admin)
    api = reverse("crowd-api:link", args=[study.pk])
    assert client.post(api, {"closed": False}, "application/json").json()["closed"] is False
    client.logout()
    assert _start(client, study, PROLIFIC_PID="P2").status_code == 302


@pytest.mark.parametrize(
    ("limit", "said"),
    [(-1, "at least 0"), (2**31, "at most 2147483647"), (10**30, "at most 2147483647")],
)
def test_a_links_cap_out_of_range_is_refused_and_changes_nothing(client, study, admin, limit, said):
    client.force_login(admin)
    api = reverse("crowd-api:link", args=[study.pk])
    reply = client.post(api, {"closed": True, "anonymous_starts_limit": limit}, "application/json")
    assert reply.status_code == 400 and "anonymous_starts_limit" in reply.json()
    page_action = reverse("crowd:publication-action", args=[study.pk])
    body = {"action": "close-link", "anonymous_starts_limit": limit}
    page = client.post(page_action, body, follow=True)
    assert page.status_code == 200 and said in page.text
    study.refresh_from_db()
    assert study.link_closed_at is None and study.anonymous_starts_limit is None


def test_only_admins_may_close_a_link(client, study, researcher):
    client.force_login(researcher)
    api = reverse("crowd-api:link", args=[study.pk])
    assert client.post(api, {"closed": True}, "application/json").status_code == 404
    study.refresh_from_db()
    assert study.link_closed_at is None


# --- The MTurk preview ------------------------------------------------------------------------


def test_preview_shows_systems_in_the_seeded_shuffled_order(db):
    project = project_with_tasks(instructions=1, systems=4, questions=1)
    task = project.batches.get().tasks.get()
    system_ids = sorted(project.systems.values_list("id", flat=True))
    orders = set()
    for seed in range(12):
        page = task_page_preview(task=task, seed=seed)
        shown = page.assignment.display_order
        assert shown == display_order_for(system_ids=system_ids, seed=seed)
        assert [r.text for r in page.responses] == [
            project.systems.get(pk=pk).responses.get().text for pk in shown
        ]
        orders.add(tuple(shown))
    assert len(orders) > 1


def test_preview_page_is_not_always_in_system_id_order(client, db):
    project = project_with_tasks(instructions=1, systems=3, questions=1)
    SystemFactory()  # a system outside the project is never shown
    publication = publishing.publication_create(
        batch=project.batches.get(),
        platform_name="fake",
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )
    publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    hit = publication.hits.get()
    texts = {s.id: s.responses.get().text for s in project.systems.order_by("id")}
    orders = set()
    for _ in range(20):
        page = client.get(
            reverse("crowd:mturk-task", args=[hit.unique_request_token]),
            {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": hit.hit_id},
        ).text
        positions = sorted((page.index(text), system_id) for system_id, text in texts.items())
        orders.add(tuple(system_id for _, system_id in positions))
    assert len(orders) > 1  # 20 previews all in one order: chance 1 in 6**19


PUBLISH_FORM = publish_form("selfhosted", title="A study", keywords="", reward_usd="2.00")


def test_publishing_a_link_asks_for_the_completion_code_participants_are_paid_for(
    client, admin, settings
):
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=2)
    batch = project.batches.get()
    client.force_login(admin)
    url = reverse("crowd:publish", args=[batch.pk])
    form = client.get(url).text
    assert 'name="completion_code"' in form and 'name="completion_url"' in form

    # Neither given: the preview warns before anything is published.
    preview = client.post(url, {**PUBLISH_FORM, "preview": "1"})
    assert 'id="no-completion"' in preview.text and "Prolific pays only" in preview.text
    given = {**PUBLISH_FORM, "completion_code": "PROLIFIC-CC9"}
    assert 'id="no-completion"' not in client.post(url, {**given, "preview": "1"}).text
    client.post(url, {**given, "confirm_total": "4.00", "publish": "1"})
    publication = batch.publications.get()
    assert publication.completion_code == "PROLIFIC-CC9"
    page = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert "the completion code <strong>PROLIFIC-CC9</strong>" in page

    done = _finish(Client(), _start(Client(), publication, PROLIFIC_PID="P1"))
    assert 'id="completion-code">PROLIFIC-CC9<' in done.text


def test_the_publish_form_starts_from_the_projects_completion_code(client, admin):
    project = project_with_tasks(instructions=1, systems=2, questions=1)
    project.completion_code = "FROM-PROJECT"
    project.save()
    client.force_login(admin)
    form = client.get(reverse("crowd:publish", args=[project.batches.get().pk])).text
    assert 'name="completion_code" value="FROM-PROJECT"' in form


def test_an_mturk_publication_keeps_no_completion_code(client, admin, settings):
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    batch = project.batches.get()
    client.force_login(admin)
    url = reverse("crowd:publish", args=[batch.pk])
    fake = {**PUBLISH_FORM, "platform": "fake", "reward_usd": "1.00"}
    preview = client.post(url, {**fake, "preview": "1"})
    # MTurk takes the HIT back itself: no warning, and 1 task × 1 × ($1 + 20 %) as before.
    assert 'id="no-completion"' not in preview.text and 'id="cost-total">$1.20<' in preview.text
    client.post(url, {**fake, "completion_code": "X", "confirm_total": "1.20", "publish": "1"})
    assert batch.publications.get().completion_code == ""


def test_an_admin_sets_the_completion_code_once_the_site_gives_it(client, study, admin):
    """Prolific shows a study's completion code once it has the study link, that is after
    publishing here: the publication page takes it, and participants get it from then on."""
    client.force_login(admin)
    detail = reverse("crowd:publication", args=[study.pk])
    page = client.get(detail).text
    assert 'id="completion"' in page and "No completion code or URL" in page
    action = reverse("crowd:publication-action", args=[study.pk])
    refused = client.post(
        action, {"action": "completion", "completion_url": "javascript:alert(1)"}, follow=True
    )
    assert "is not an http(s) address" in refused.text
    client.post(action, {"action": "completion", "completion_code": " LATE-CODE "})
    study.refresh_from_db()
    assert (study.completion_code, study.completion_url) == ("LATE-CODE", "")
    done = _finish(client, _start(Client(), study, PROLIFIC_PID="P9"))
    assert 'id="completion-code">LATE-CODE<' in done.text
    back = "https://app.prolific.com/submissions/complete?cc=LATE-CODE"
    client.post(action, {"action": "completion", "completion_url": back})
    done = _finish(Client(), _start(Client(), study, PROLIFIC_PID="P10"))
    assert done.status_code == 302 and done["Location"] == back


def test_a_selfhosted_publication_page_shows_no_mturk_fields(client, study, admin):
    client.force_login(admin)
    page = client.get(reverse("crowd:publication", args=[study.pk])).text
    assert "HIT type" not in page and "Sync assignments now" not in page
    assert "paid on the site that recruited them" in page


def test_blocking_a_link_participant_says_the_link_offers_their_tasks(client, study, admin):
    """The block's message spoke of Mechanical Turk's replacements page to an admin blocking a
    participant of a self-hosted link, which has neither HITs nor that page."""
    started = _start(Client(), study, PROLIFIC_PID="P1")
    assert started.status_code == 302
    participant = Annotator.objects.get(worker_id="P1")
    client.force_login(admin)
    page = client.post(
        reverse("crowd:worker-action", args=[participant.pk]),
        {"action": "block", "reason": "bot"},
        follow=True,
    ).text
    assert "Worker blocked" in page and "offered to other participants of the link" in page
    assert "Mechanical Turk" not in page


def test_a_human_studys_confirm_at_another_total_says_why_nothing_was_published(client, admin):
    """A batch's page says why a Confirm published nothing; a study's showed the preview again
    without a word, so the admin could not tell whether the study went out."""
    from annotate.verbalizer.services.humans import human_study_create
    from annotate.verbalizer.services.sets import evaluation_set_create
    from tests.annotate.verbalizer.helpers import fill

    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="crowd", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=1)
    client.force_login(admin)
    url = reverse("verbalizer:study-publish", args=[study.pk])
    page = client.post(url, {**PUBLISH_FORM, "confirm_total": "9.99", "publish": "1"}).text
    assert not study.publications.exists()
    assert "Nothing was published: the total is now $4.00, not the $9.99 you confirmed" in page


def test_a_human_studys_publish_form_asks_no_completion_code(client, admin):
    """A human study keeps its completion code on the study (docs/verbalizer.md)."""
    from annotate.verbalizer.services.humans import human_study_create
    from annotate.verbalizer.services.sets import evaluation_set_create
    from tests.annotate.verbalizer.helpers import fill

    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="crowd", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=1)
    client.force_login(admin)
    page = client.get(reverse("verbalizer:study-publish", args=[study.pk]))
    assert page.status_code == 200 and 'name="reward_usd"' in page.text
    assert 'name="completion_code"' not in page.text


def test_a_human_studys_link_preview_warns_when_the_study_has_no_completion_code(
    client, admin, settings
):
    """As a batch's link preview does: without the study's code or URL its participants get
    nothing a site such as Prolific pays on, so the preview says so before anything is made."""
    from annotate.verbalizer.services.humans import human_study_create
    from annotate.verbalizer.services.sets import evaluation_set_create
    from tests.annotate.verbalizer.helpers import fill

    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="crowd", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=1)
    client.force_login(admin)
    url = reverse("verbalizer:study-publish", args=[study.pk])
    preview = client.post(url, {**PUBLISH_FORM, "preview": "1"})
    assert 'id="cost-total"' in preview.text
    assert 'id="no-completion"' in preview.text and "Prolific pays only" in preview.text
    assert "Set it on the publication page" in preview.text
    assert not study.publications.exists()
    study.completion_code = "FLIP-CC"
    study.save(update_fields=["completion_code"])
    assert 'id="no-completion"' not in client.post(url, {**PUBLISH_FORM, "preview": "1"}).text


def test_one_address_cannot_take_a_links_tasks_under_made_up_ids(client, study, worker_rates):
    """Every start with a new participant id claims a task: past the per-address limit the
    link answers 429 with Retry-After and claims nothing; another address still starts."""
    clock = worker_rates(starts="2/hour")
    assert [_start(client, study, PROLIFIC_PID=f"P{i}").status_code for i in (1, 2)] == [302, 302]
    refused = _start(client, study, PROLIFIC_PID="P3")
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert "Too many requests from your address" in refused.content.decode()
    assert not Annotator.objects.filter(worker_id="P3").exists()
    assert Assignment.objects.filter(annotator__worker_id__in=["P1", "P2"]).count() == 2
    assert client.get(_join_url(study)).status_code == 200  # the start page itself claims nothing
    other_address = Client(REMOTE_ADDR="203.0.113.7")
    assert _start(other_address, study, PROLIFIC_PID="P4").status_code == 302
    clock[0] += 3600
    assert _start(client, study, PROLIFIC_PID="P3").status_code == 302


def test_every_worker_page_is_limited_per_address(client, study, worker_rates):
    worker_rates(pages="3/minute")
    started = _start(client, study, PROLIFIC_PID="P1")
    assert client.get(started["Location"]).status_code == 200
    assert client.get(_join_url(study)).status_code == 200
    refused = client.get(started["Location"])
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert Client(REMOTE_ADDR="203.0.113.7").get(started["Location"]).status_code == 200


def test_a_participants_next_task_is_not_counted_as_a_new_start(client, study, worker_rates):
    """The "Do the next task" button posts to the link's start again: a participant quicker than the
    per-address start limit (60 an hour) was refused their own next task."""
    worker_rates(starts="1/hour")
    started = _start(client, study, PROLIFIC_PID="P1")
    assert _finish(client, started).status_code == 200
    done = client.get(started["Location"]).text
    assert 'id="next-task"' in done
    following = _start(client, study, workerId="P1")
    assert following.status_code == 302 and following["Location"] != started["Location"]
    assert Assignment.objects.filter(annotator__worker_id="P1").count() == 2
    assert _start(client, study, PROLIFIC_PID="P2").status_code == 429  # a new one still counts


def test_one_address_holds_few_open_claims_under_made_up_ids(client, study, settings):
    """Each made-up participant id claimed a task that held its slot until its time ran out,
    60 an hour from one address: now at most CROWD_OPEN_CLAIMS_PER_ADDRESS open at once."""
    settings.CROWD_OPEN_CLAIMS_PER_ADDRESS = 2
    first, second = (_start(client, study, PROLIFIC_PID=f"P{i}") for i in (1, 2))
    assert (first.status_code, second.status_code) == (302, 302)
    refused = _start(client, study, PROLIFIC_PID="P3")
    assert refused.status_code == 429
    allotted = study.batch.project.allotted_minutes * 60
    assert allotted - 5 <= int(refused["Retry-After"]) <= allotted
    assert "Too many open tasks from your address (at most 2 at a time)" in refused.text
    assert "Submit or return one of them first" in refused.text
    assert not Annotator.objects.filter(worker_id="P3").exists()  # nothing claimed or made
    again = _start(client, study, PROLIFIC_PID="P1")  # a participant's own open claim
    # The same assignment: the signed token's payload (its signature carries the second it
    # was made, so two tokens a second apart differ after the first ':').
    assert again.status_code == 302
    assert again["Location"].split(":")[0] == first["Location"].split(":")[0]
    assert Assignment.objects.filter(annotator__worker_id="P1").count() == 1
    assert _start(Client(REMOTE_ADDR="203.0.113.7"), study, PROLIFIC_PID="P4").status_code == 302
    _finish(client, first)  # a submitted task is no longer open
    assert _start(client, study, PROLIFIC_PID="P3").status_code == 302
    assert _start(client, study, PROLIFIC_PID="P5").status_code == 429


def test_a_participants_lapsed_claim_in_a_closed_batch_says_so_and_takes_no_answers(client, study):
    from datetime import timedelta

    started = _start(client, study, PROLIFIC_PID="P1")
    Assignment.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    study.batch.active = False
    study.batch.save()
    page = client.get(started["Location"])
    assert page.status_code == 200 and 'id="batch-closed"' in page.text
    assert "takes no more answers" in page.text and 'id="return-task"' in page.text
    refused = _finish(client, started)
    assert refused.status_code == 410 and "This batch is closed" in refused.text
    assert Assignment.objects.get().submitted_at is None and not Label.objects.exists()


def test_a_participant_back_after_their_last_task_gets_their_completion_code_again(client, study):
    """The link answered only "No task left for you ... Thank you!": a participant whose done
    page closed before they copied the code had no way to get it."""
    study.completion_code = "CODE-42"
    study.save(update_fields=["completion_code"])
    for _ in range(2):
        assert _finish(client, _start(client, study, PROLIFIC_PID="P1")).status_code == 200
    back = _start(client, study, PROLIFIC_PID=" P1 ")
    assert back.status_code == 404
    assert '<strong id="completion-code">CODE-42</strong>' in back.text
    assert 'id="no-code"' not in back.text


def test_a_newcomer_to_a_full_link_is_told_there_is_no_code_and_to_return_the_study(client, db):
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    study = _study(project)
    study.completion_code = "CODE-42"
    study.save(update_fields=["completion_code"])
    assert _start(client, study, PROLIFIC_PID="P1").status_code == 302  # takes the only slot
    late = _start(client, study, PROLIFIC_PID="P2")
    assert late.status_code == 404
    assert 'id="no-code"' in late.text and "Return submission" in late.text
    assert "CODE-42" not in late.text
    assert not Assignment.objects.filter(annotator__worker_id="P2").exists()


def test_a_newcomer_reads_on_the_join_page_that_a_full_link_has_nothing_left(
    client, db, django_assert_max_num_queries
):
    """The join page showed Start to a newcomer of a full link, and the refusal came only after
    pressing it: the page itself now says there is nothing left and to return the study."""
    from datetime import timedelta

    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    study = _study(project)
    first = client.get(_join_url(study), {"PROLIFIC_PID": "P2"})
    assert 'id="join-form"' in first.text and 'id="study-full"' not in first.text
    assert _start(client, study, PROLIFIC_PID="P1").status_code == 302  # takes the only slot
    for params in ({"PROLIFIC_PID": "P2"}, {}):  # a newcomer with an id, and one without
        # The link, whether the id has work there, the slot counters: no scan of the tasks.
        with django_assert_max_num_queries(3):
            page = client.get(_join_url(study), params)
        assert page.status_code == 200
        assert 'id="join-form"' not in page.text and "Start</button>" not in page.text
        assert 'id="study-full"' in page.text and "Return submission" in page.text
    # The participant holding the slot still gets Start (their task back, later their code).
    back = client.get(_join_url(study), {"PROLIFIC_PID": "P1"})
    assert 'id="join-form"' in back.text and 'id="study-full"' not in back.text
    # A claim past its time that the beat has not expired yet frees its slot, as for the claim.
    Assignment.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    assert 'id="join-form"' in client.get(_join_url(study), {"PROLIFIC_PID": "P2"}).text


def test_the_guidelines_are_open_on_a_workers_first_task_and_on_a_preview(client, study):
    first = _start(client, study, PROLIFIC_PID="P1")
    assert '<details class="guidelines" open>' in client.get(first["Location"]).text
    _finish(client, first)
    second = _start(client, study, PROLIFIC_PID="P1")
    assert '<details class="guidelines">' in client.get(second["Location"]).text
    fake = publishing.publication_create(
        batch=study.batch,
        platform_name="fake",
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )
    publishing.publication_publish(publication_id=fake.pk, now=timezone.now())
    hit = fake.hits.first()
    preview = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": hit.hit_id},
    )
    assert '<details class="guidelines" open>' in preview.text


def test_a_workers_incomplete_submit_names_no_field(client, study):
    started = _start(client, study, PROLIFIC_PID="P1")
    refused = client.post(started["Location"], {"r1_q1": "yes"})
    assert refused.status_code == 400
    error = re.search(r'<p class="error" role="alert">(.*?)</p>', refused.text).group(1)
    assert error == "1 of 2 answers are missing: they are listed below."
    assert "System B, question 1" in refused.text


def _next_task_form(page: str) -> tuple[str, dict]:
    form = re.search(
        r'<form method="post" action="([^"]+)" id="next-task">(.*?)</form>', page, re.S
    )
    return form.group(1), dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(2)))


def test_do_the_next_task_keeps_the_study_and_session_ids_of_the_recruiting_site(client, study):
    """The next task's start sent only workerId: its assignment lost Prolific's STUDY_ID and
    SESSION_ID, which the first one kept."""
    first = _start(client, study, PROLIFIC_PID="P1", STUDY_ID="S-1", SESSION_ID="SESS-1")
    url, fields = _next_task_form(_finish(client, first).text)
    assert fields == {"workerId": "P1", "STUDY_ID": "S-1", "SESSION_ID": "SESS-1"}
    assert client.post(url, fields).status_code == 302
    kept = Assignment.objects.filter(annotator__worker_id="P1").order_by("pk")
    assert [(a.platform_hit_id, a.platform_assignment_id) for a in kept] == [("S-1", "SESS-1")] * 2


def test_a_returned_tasks_next_task_keeps_them_too(client, study):
    first = _start(client, study, PROLIFIC_PID="P1", STUDY_ID="S-1", SESSION_ID="SESS-1")
    client.post(first["Location"].rstrip("/") + "/return/")
    _, fields = _next_task_form(client.get(first["Location"]).text)
    assert fields == {"workerId": "P1", "STUDY_ID": "S-1", "SESSION_ID": "SESS-1"}


def test_a_participant_sees_which_task_of_the_links_batch_they_are_on(client):
    """As on an annotator's task page: "task 2 of 3" of the link's batch (a task of another
    batch of the project is not theirs to do), the submitted count, and no further task
    promised to a participant blocked since."""
    from annotate.crowd.models import WorkerBlock
    from tests.factories import BatchFactory, InstructionFactory, TaskFactory

    project = project_with_tasks(instructions=3, systems=2, questions=1, assignments_per_task=5)
    study = _study(project)
    TaskFactory(
        batch=BatchFactory(project=project),
        instruction=InstructionFactory(benchmark=project.benchmark),
    )
    first = client.get(_start(client, study, PROLIFIC_PID="P1")["Location"]).text
    assert "· task 1 of 3</span>" in first and "0 submitted" in first
    _finish(client, _start(client, study, PROLIFIC_PID="P1"))
    started = _start(client, study, PROLIFIC_PID="P1")
    second = client.get(started["Location"]).text
    assert "· task 2 of 3</span>" in second and "1 submitted" in second
    WorkerBlock.objects.create(annotator=Annotator.objects.get(worker_id="P1"), reason="r")
    assert "· task 2 of 2</span>" in client.get(started["Location"]).text
