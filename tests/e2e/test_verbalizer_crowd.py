"""A human study on (fake) MTurk in a real browser: an admin publishes it from the set page, a
crowd worker answers two HITs inside MTurk's frame with keys 1 and 2, the browser hands each
assignment back to MTurk, and the admin syncs, reviews and approves; the answers reach the
report as the crowd's."""

import re
from urllib.parse import urlencode

import pytest

import tests.e2e.test_crowd as crowd_e2e
from annotate.crowd.models import Publication, PublicationStatus
from annotate.roles import ADMIN
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services.humans import human_study_create
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

fake_mturk = crowd_e2e.fake_mturk  # the fake MTurk server, as the crowd browser test uses it


def answer_in_frame(worker, fake_mturk, hit, worker_id, key):
    url = crowd_e2e.external_url(fake_mturk, hit)
    accepted = {
        "assignmentId": fake_mturk.api.worker_accept(hit.hit_id, worker_id),
        "hitId": hit.hit_id,
        "workerId": worker_id,
        "turkSubmitTo": fake_mturk.url,
    }
    worker.goto(f"{fake_mturk.url}/frame?" + urlencode({"src": f"{url}?{urlencode(accepted)}"}))
    frame = worker.locator("#hit-frame").element_handle().content_frame()
    frame.locator("#answer-form").wait_for()
    frame.wait_for_load_state()  # the key handler is a deferred script: a person never beats it
    text = frame.locator("#prompt-text").inner_text()
    frame.locator("#prompt-text").click()  # the worker's keys go to the HIT's frame
    worker.keyboard.press(str(key))
    frame.locator("text=HIT submitted.").wait_for()  # the fake MTurk's reply, inside the frame
    return accepted["assignmentId"], text


def test_admin_publishes_a_study_and_a_worker_answers_with_keys(page_for, fake_mturk, snap):
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="e2e-crowd", datasets=["Reviews"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=1)
    admin = page_for(UserFactory(username="boss", roles=[ADMIN], is_staff=True))

    admin.goto(f"/verbalizer/sets/{evaluation_set.pk}/")
    admin.click("text=Publish to a crowd platform")
    admin.wait_for_url(f"**/verbalizer/studies/{study.pk}/publish/")
    admin.select_option("#id_platform", "mturk")
    admin.click("text=Preview the cost")
    # 2 × 1 × ($0.05 + MTurk's $0.01 fee: 20 % of it, also the minimum)
    assert admin.locator("#cost-total").inner_text() == "$0.12"
    admin.click("text=Confirm: publish for")
    admin.wait_for_url("**/crowd/publications/*/")
    publication = Publication.objects.get(human_study=study, platform="mturk")
    admin.reload()
    assert admin.locator("#progress-text").inner_text() == "2 of 2"
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PUBLISHED

    worker = page_for()  # no login, no cookies of ours
    hits = {h.prompt.item.position: h for h in publication.hits.select_related("prompt__item")}
    first_id, first_text = answer_in_frame(worker, fake_mturk, hits[1], "AWORKER1", 1)
    assert 'Answer "negative" if the sentiment of the text is "positive"' in first_text
    answer_in_frame(worker, fake_mturk, hits[2], "AWORKER1", 2)
    assert [s["assignmentId"] for s in fake_mturk.state.external_submits][0] == first_id

    answers = {
        a.prompt.item.position: a for a in HumanAnswer.objects.select_related("prompt__item")
    }
    assert (answers[1].word, answers[2].word) == ("negative", "positive")  # flipped: both right
    assert all(0 <= a.seconds < 60 for a in answers.values())
    assert answers[1].prompt.text.startswith(first_text.split("\n")[0])

    admin.goto(f"/crowd/publications/{publication.pk}/")
    admin.click("text=Sync assignments now")
    admin.locator(".messages", has_text="Syncing").wait_for()
    admin.click("#review-link")
    admin.wait_for_url(f"**/verbalizer/publications/{publication.pk}/review/")
    assert admin.locator("#reconciliation").count() == 0  # every assignment matched an answer
    rows = admin.locator("#review tbody tr")
    assert rows.count() == 2
    assert [c.inner_text() for c in admin.locator("#review .confirmation").all()] == [
        "confirmed",
        "confirmed",
    ]
    rows.first.get_by_role("button", name="Approve").click()
    admin.locator(".messages", has_text="Approved.").wait_for()
    snap(admin, "approved")
    assert fake_mturk.state.assignments[first_id]["AssignmentStatus"] == "Approved"

    # One answer approved, one waiting: $0.06 each, and in all the $0.12 the preview said.
    admin.goto(f"/crowd/publications/{publication.pk}/")
    assert admin.locator("#spent-total").inner_text() == "$0.12"
    approved, waiting = (admin.locator(f"#spent-{n}").inner_text() for n in ("approved", "waiting"))
    assert approved.startswith("approved answers: 1 answer, $0.06")
    assert waiting.startswith("submitted, not reviewed yet: 1 answer, $0.06")

    # The report's first rendering in the run loads its statistics and figure code: under a
    # loaded CI machine it took longer than a page's usual 10 s (a time, not a result).
    admin.goto(f"/reports/verbalizer/{evaluation_set.pk}/", timeout=30_000)
    groups = admin.locator("table").nth(0)
    assert groups.locator("tr", has_text="human-crowd").count() == 2  # answers and majority
    assert "AWORKER1" not in admin.locator("main").inner_text()


def test_an_admin_answers_a_study_hit_as_a_demo_worker_with_a_key(page_for, settings):
    """make run's offline platform: "Do it as a worker" on a study's prompt opens it as MTurk
    would, key 1 answers, the done page's script hands it to the platform's externalSubmit
    stand-in (allowed by the CSP), and a sync confirms it."""
    from annotate.crowd.fake import FakePlatform

    settings.CROWD_BACKEND = "fake"
    fill("Reviews", [True])
    evaluation_set = evaluation_set_create(
        name="e2e-demo", datasets=["Reviews"], items=1, seed=1, mappings="golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="demo", answers_per_prompt=1)
    admin = page_for(UserFactory(username="demo-boss", roles=[ADMIN], is_staff=True))
    admin.set_default_timeout(10_000)
    admin.goto(f"/verbalizer/studies/{study.pk}/publish/")
    admin.select_option("#id_platform", "fake")
    admin.click("text=Preview the cost")
    admin.click("text=Confirm: publish for")
    admin.wait_for_url("**/crowd/publications/*/")
    publication = Publication.objects.get(human_study=study, platform="fake")
    admin.reload()
    admin.get_by_role("button", name="Do it as a worker").click()
    admin.locator("#answer-form").wait_for()
    admin.wait_for_load_state()  # the key handler is a deferred script
    assert admin.locator("#worker-view").is_visible()
    admin.keyboard.press("1")
    admin.locator("text=The offline demo platform took assignment").wait_for()  # the script
    answer = HumanAnswer.objects.get(annotator__worker_id="DEMOWORKER1")
    assert answer.word == answer.prompt.positive_word
    assert FakePlatform.store.assignments[answer.platform_assignment_id].status == "Submitted"

    admin.goto(f"/crowd/publications/{publication.pk}/")
    assert admin.locator("td.hit-work").inner_text() == "1 / 1 / 1"
    admin.click("text=Sync assignments now")
    admin.locator(".messages", has_text="Syncing").wait_for()
    admin.goto(f"/verbalizer/publications/{publication.pk}/review/")
    assert admin.locator(".confirmation").first.inner_text() == "confirmed"


def test_a_participants_time_runs_from_the_prompts_first_showing_across_a_reload(page_for):
    """As on the in-house page: a reload on a self-hosted link restarted the clock. The first
    showing is kept in the tab; here it is set two minutes back."""
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="e2e-link-time", datasets=["Reviews"], items=2, seed=1, mappings="golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="time", answers_per_prompt=1)
    admin = page_for(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    admin.goto(f"/verbalizer/studies/{study.pk}/publish/")
    admin.select_option("#id_platform", "selfhosted")
    admin.click("text=Preview the cost")
    admin.click("text=Confirm: publish")
    admin.wait_for_url("**/crowd/publications/*/")
    join = admin.locator("#join-url").inner_text()

    worker = page_for()
    worker.goto(join + "?PROLIFIC_PID=p-slow")
    worker.get_by_role("button", name="Start").click()
    worker.locator("#answer-form").wait_for()
    worker.wait_for_load_state()
    key = worker.locator("#answer-form").get_attribute("data-shown-key")
    shown = worker.evaluate("key => Number(sessionStorage.getItem(key))", key)
    assert shown > 0
    worker.evaluate(
        "([key, at]) => sessionStorage.setItem(key, String(at))", [key, shown - 120_000]
    )
    worker.reload()
    worker.wait_for_load_state()
    assert worker.locator("#answer-form").get_attribute("data-shown-key") == key  # same prompt
    worker.keyboard.press("1")
    worker.locator("#progress", has_text="You answered 1 of 2.").wait_for()
    assert HumanAnswer.objects.get().seconds >= 120


def test_a_study_goes_on_a_link_after_a_hit_only_setting_was_emptied(page_for):
    """An approval rate emptied under the platform's choice, then the link chosen: its hidden
    input's `required` refused the submit silently. Disabling it in site.js alone made this
    page's Confirm fail now and then: the preview page rendered it enabled and empty (it was
    not sent), so a Confirm pressed before the deferred site.js ran was refused in turn. The
    server renders it disabled for the link: here the preview page's site.js never runs. The
    study's form ends with a HIT-only row, which holds the confirmed total: still sent."""
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="e2e-link-emptied", datasets=["Reviews"], items=2, seed=1, mappings="golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="emptied", answers_per_prompt=1)
    admin = page_for(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    admin.goto(f"/verbalizer/studies/{study.pk}/publish/")
    admin.fill("#id_min_percent_approved", "")
    admin.select_option("#id_platform", "selfhosted")
    admin.route(re.compile(r"/annotate/site\.js"), lambda route: route.abort())
    admin.click("text=Preview the cost")
    admin.click("text=Confirm: publish")
    admin.wait_for_url("**/crowd/publications/*/")
    assert Publication.objects.get(human_study=study).platform == "selfhosted"
