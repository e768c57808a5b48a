"""The admin's pages for a human study on the crowd: publish from the set page (admins only: it
spends money), follow the publication, review, approve and reject answers."""

import re
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import Publication
from annotate.crowd.services import review
from annotate.crowd.services.publishing import PublishSettings
from annotate.models import Annotator
from annotate.roles import ADMIN, RESEARCHER
from annotate.selectors.results import counted_human_answer_q
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services import crowd
from annotate.verbalizer.services.humans import human_study_create
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(db):
    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="pages", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    return human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=2)


def publish_form(**extra):
    return {
        "platform": "fake",
        "title": "Pick a word",
        "description": "Keys 1 and 2",
        "keywords": "x",
        "reward_usd": "0.10",
        "assignment_minutes": "5",
        "auto_approval_hours": "72",
        "lifetime_hours": "24",
        "min_percent_approved": "90",
        "min_hits_approved": "500",
        **extra,
    }


def test_only_admins_publish_a_study(client, study):
    client.force_login(UserFactory(username="res", roles=[RESEARCHER]))
    page = client.get(reverse("verbalizer:set-detail", args=[study.evaluation_set_id]))
    assert page.status_code == 200
    assert b"Publish to a crowd platform" not in page.content
    assert b"an admin publishes to the crowd" in page.content
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    assert client.get(publish).status_code == 403
    assert client.post(publish, publish_form(publish="1", confirm_total="0.50")).status_code == 403
    assert not Publication.objects.exists()


def test_a_reward_the_platform_refuses_is_refused_at_the_preview_beside_its_field(client, study):
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    page = client.post(publish, publish_form(preview="1", reward_usd="0", title="Mine"))
    assert page.status_code == 200
    assert "at least $0.01" in " ".join(page.context["form"].errors["reward_usd"])
    assert b'id="cost-total"' not in page.content and b'name="publish"' not in page.content
    assert b'value="Mine"' in page.content
    assert not Publication.objects.exists()


def test_admin_previews_publishes_and_reviews(
    client, study, settings, django_assert_max_num_queries, django_capture_on_commit_callbacks
):
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    admin = UserFactory(username="boss", roles=[ADMIN], is_staff=True)
    client.force_login(admin)
    set_page = client.get(reverse("verbalizer:set-detail", args=[study.evaluation_set_id]))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    assert publish.encode() in set_page.content

    page = client.get(publish)
    assert page.status_code == 200 and b'class="site-form' in page.content
    assert "Publish human study “flip”".encode() in page.content
    preview = client.post(publish, publish_form(preview="1"))
    # 2 prompts × 2 workers × ($0.10 + MTurk's 20 %) = $0.48
    assert b'id="cost-total">$0.48' in preview.content
    assert not Publication.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(publish, publish_form(publish="1", confirm_total="0.48"))
    publication = Publication.objects.get(human_study=study)
    assert done.status_code == 302 and done["Location"] == reverse(
        "crowd:publication", args=[publication.pk]
    )
    publication.refresh_from_db()  # eager Celery published it on commit
    assert publication.status == "published" and publication.hits.count() == 2
    detail = client.get(done["Location"]).content.decode()
    assert "Human study flip on Offline demo" in detail
    assert "SST-2 #1 · flipped-golden · direct" in detail
    assert reverse("verbalizer:crowd-review", args=[publication.pk]) in detail

    # Two workers answer each HIT on the fake platform (its own worker side), then sync.
    for hit in publication.hits.select_related("prompt"):
        for worker in ("W1", "W2"):
            assignment_id = FakePlatform().worker_accept(hit_id=hit.hit_id, worker_id=worker)
            ticket = crowd.mturk_prompt_open(
                hit=hit, assignment_id=assignment_id, hit_id=hit.hit_id, worker_id=worker,
                turk_submit_to="https://www.mturk.com",
            )  # fmt: skip
            crowd.mturk_answer_submit(ticket=ticket, key=1, seconds=2.0)
            FakePlatform().worker_submit(assignment_id=assignment_id)
    review.publication_sync(publication_id=publication.pk, now=timezone.now())

    review_url = reverse("verbalizer:crowd-review", args=[publication.pk])
    with django_assert_max_num_queries(12):
        page = client.get(review_url)
    text = page.content.decode()
    assert text.count('class="confirmation">confirmed<') == 4
    assert "W1" in text and "2/2" not in text  # each worker: key 1 is right on 1 of 2 items
    assert text.count("1/2") == 4

    answer = HumanAnswer.objects.filter(annotator__worker_id="W2").first()
    action = reverse("verbalizer:answer-action", args=[answer.pk])
    refused = client.post(action, {"action": "reject", "feedback": ""}, HTTP_REFERER=review_url)
    assert refused.status_code == 302
    answer.refresh_from_db()
    assert answer.status == "submitted"  # a rejection needs feedback for the worker
    client.post(action, {"action": "reject", "feedback": "random"}, HTTP_REFERER=review_url)
    answer.refresh_from_db()
    assert answer.status == "rejected"
    other = HumanAnswer.objects.filter(annotator__worker_id="W1").first()
    client.post(reverse("verbalizer:answer-action", args=[other.pk]), {"action": "approve"})
    other.refresh_from_db()
    assert other.status == "approved"
    # The crowd review URL of a study sends the admin to this page.
    crowd_review = client.get(reverse("crowd:review", args=[publication.pk]))
    assert crowd_review["Location"] == review_url
    listing = client.get(reverse("crowd:publication-list")).content.decode()
    assert "Human study flip" in listing


def test_a_study_on_a_selfhosted_link_from_the_pages(
    client, study, settings, django_capture_on_commit_callbacks
):
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    preview = client.post(publish, publish_form(platform="selfhosted", preview="1"))
    # 2 prompts × 2 answers × $0.10, no fee: paid on the recruiting site (it said $0.00).
    assert b'id="cost-total">$0.40' in preview.content
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(
            publish, publish_form(platform="selfhosted", publish="1", confirm_total="0.40")
        )
    publication = Publication.objects.get(human_study=study, platform="selfhosted")
    detail = client.get(done["Location"]).content.decode()
    join = reverse("verbalizer:crowd-link-join", args=[publication.link_token])
    assert f"http://testserver{join}" in detail
    closed = client.post(
        reverse("crowd:publication-action", args=[publication.pk]), {"action": "close-link"}
    )
    assert closed.status_code == 302
    client.logout()
    assert client.post(join, {"PROLIFIC_PID": "P-1"}).status_code == 410


def test_a_studys_completion_code_is_set_after_publishing_its_link(
    client, study, settings, django_capture_on_commit_callbacks
):
    """The recruiting site (Prolific) gives its completion code once it has the study's link,
    that is after publishing; a study published without one had no way to get it: the
    publication page said "none was set with the study" and refused to set it."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("verbalizer:study-publish", args=[study.pk]),
            publish_form(platform="selfhosted", publish="1", confirm_total="0.40"),
        )
    publication = Publication.objects.get(human_study=study, platform="selfhosted")
    page_url = reverse("crowd:publication", args=[publication.pk])
    assert "No completion code or URL: participants get none." in client.get(page_url).text
    saved = client.post(
        reverse("crowd:publication-action", args=[publication.pk]),
        {"action": "completion", "completion_code": " C0DE42 ", "completion_url": ""},
    )
    assert saved.status_code == 302
    study.refresh_from_db()
    assert (study.completion_code, study.completion_url) == ("C0DE42", "")
    page = client.get(page_url).text
    assert "the study's completion code <strong>C0DE42</strong>" in page
    assert 'name="completion_code" maxlength="100" value="C0DE42"' in page
    client.logout()
    participant = crowd.study_link_start(publication=publication, params={"PROLIFIC_PID": "P1"})
    for prompt in study.prompts.all():
        crowd.link_answer_submit(participant=participant, prompt_id=prompt.pk, key=1, seconds=1)
    join = reverse("verbalizer:crowd-link-join", args=[publication.link_token])
    done = client.post(join, {"PROLIFIC_PID": "P1"}, follow=True).text
    assert "C0DE42" in done  # what the participant brings back to the recruiting site


def test_a_newcomer_reads_on_a_full_study_links_join_page_that_nothing_is_left(
    client, study, settings, django_capture_on_commit_callbacks
):
    """As for a batch's link: Start on a study every prompt of which has its answers led a
    newcomer to "Nothing left for you" only after pressing it."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("verbalizer:study-publish", args=[study.pk]),
            publish_form(platform="selfhosted", publish="1", confirm_total="0.40"),
        )
    publication = Publication.objects.get(human_study=study, platform="selfhosted")
    client.logout()
    join = reverse("verbalizer:crowd-link-join", args=[publication.link_token])
    assert 'id="join-form"' in client.get(join, {"PROLIFIC_PID": "P3"}).content.decode()
    for worker in ("P1", "P2"):  # two answers per prompt: the study is full
        participant = crowd.study_link_start(
            publication=publication, params={"PROLIFIC_PID": worker}
        )
        for prompt in study.prompts.all():
            crowd.link_answer_submit(participant=participant, prompt_id=prompt.pk, key=1, seconds=1)
    for params in ({"PROLIFIC_PID": "P3"}, {}):
        page = client.get(join, params).content.decode()
        assert 'id="join-form"' not in page and 'id="study-full"' in page
        assert "Return submission" in page
    back = client.get(join, {"PROLIFIC_PID": "P1"}).content.decode()  # their code, as before
    assert 'id="join-form"' in back and 'id="study-full"' not in back


def test_start_pressed_twice_on_a_study_link_without_an_id_is_one_participant(
    client, study, settings, django_capture_on_commit_callbacks
):
    """As on a batch's link: each Start without a participant id made a new participant, so a
    double click answered the study's prompts as two raters."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("verbalizer:study-publish", args=[study.pk]),
            publish_form(platform="selfhosted", publish="1", confirm_total="0.40"),
        )
    publication = Publication.objects.get(human_study=study, platform="selfhosted")
    client.logout()
    join = reverse("verbalizer:crowd-link-join", args=[publication.link_token])
    assert client.post(join).status_code == client.post(join).status_code == 302
    anonymous = Annotator.objects.filter(worker_id__startswith="anon-")
    assert anonymous.count() == 1
    assert Client().post(join).status_code == 302  # another browser, another participant
    assert anonymous.count() == 2


def test_review_reads_answers_against_the_word_the_instruction_asks_for(
    client, study, settings, django_capture_on_commit_callbacks
):
    """Under flipped golden the right answer to a positive item is "negative": the review page
    called it "matches the golden label" and a wrong "negative" on a negative item "golden:
    positive", as if the item were positive."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(publish, publish_form(platform="selfhosted", publish="1", confirm_total="0.40"))
    publication = Publication.objects.get(human_study=study)
    participant = crowd.study_link_start(publication=publication, params={"PROLIFIC_PID": "P1"})
    for prompt in study.prompts.all():  # key 2 on both: the second word, "positive"
        crowd.link_answer_submit(participant=participant, prompt_id=prompt.pk, key=2, seconds=1)
    page = client.get(reverse("verbalizer:crowd-review", args=[publication.pk])).content.decode()
    table = page.split('<table id="review">', 1)[1].split("</table>", 1)[0]
    assert "golden" not in table.replace("flipped-golden", "")
    assert "positive (as the instruction asks)" in page  # item 2, negative: "positive"
    assert 'positive <span class="tags">(the instruction asks for negative)</span>' in page
    assert '<th scope="col">Worker\'s answers as asked</th>' in page
    assert '<div class="table-scroll"' in page  # nine columns: it scrolls, not the page


def test_an_admin_answers_a_study_hit_on_the_offline_demo_platform_as_a_worker(
    client, study, settings, django_capture_on_commit_callbacks
):
    """ "Do it as a worker" (README) played InFoBench HITs only: a human study published on the
    offline platform could not be answered as a crowd worker on a fresh machine. Now the admin
    takes a prompt's HIT as a demo worker, MTurk's way (ExternalQuestion URL, externalSubmit),
    and the answer counts only after a sync confirms it, as on MTurk."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    study.completion_code = "FLIP-1"
    study.save(update_fields=["completion_code"])
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(publish, publish_form(publish="1", confirm_total="0.48"))
        client.post(publish, publish_form(platform="selfhosted", publish="1", confirm_total="0.40"))
    on_demo = Publication.objects.get(human_study=study, platform="fake")
    detail = reverse("crowd:publication", args=[on_demo.pk])
    page = client.get(detail).content.decode()
    assert 'id="demo-worker-note"' in page and 'id="demo-study-note"' not in page
    assert f'href="{reverse("verbalizer:work-list")}">Label-word tasks</a>' in page
    hit = on_demo.hits.select_related("prompt").order_by("id").first()
    start = reverse("crowd:demo-worker", args=[hit.pk])
    assert f'action="{start}"' in page

    opened = client.post(start)
    assert opened.status_code == 302 and "workerId=DEMOWORKER1" in opened["Location"]
    assert opened["Location"].startswith(
        reverse("verbalizer:crowd-mturk", args=[hit.unique_request_token])
    )
    prompt_page = client.get(opened["Location"]).content.decode()
    assert 'id="answer-form"' in prompt_page and escape(hit.prompt.text) in prompt_page
    action = re.search(r'<form method="post" action="([^"]+)" id="answer-form"', prompt_page)
    done = client.post(action.group(1), {"key": "1", "seconds": "2.5"}).content.decode()
    submit = reverse("crowd:demo-external-submit")
    assert f'action="{submit}"' in done
    answer = HumanAnswer.objects.get(annotator__worker_id="DEMOWORKER1")
    assert answer.word == hit.prompt.positive_word and answer.seconds == 2.5
    token = re.search(r'name="token" value="([^"]+)"', done).group(1)
    mine = {"assignmentId": answer.platform_assignment_id, "token": token}
    # Only the token of the worker's own done page submits their HIT, and only once.
    assert client.post(submit, {**mine, "token": "forged"}).status_code == 404
    assert client.post(submit, {**mine, "assignmentId": "FAKEASG99"}).status_code == 404
    taken = client.post(submit, mine)
    assert taken.status_code == 200 and "took assignment" in taken.content.decode()
    again = client.post(submit, mine)  # a reload: the platform keeps the first submit
    assert again.status_code == 200 and "submitted before" in again.content.decode()
    assert not HumanAnswer.objects.filter(counted_human_answer_q(), pk=answer.pk).exists()

    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("crowd:publication-action", args=[on_demo.pk]), {"action": "sync"})
    review_page = client.get(reverse("verbalizer:crowd-review", args=[on_demo.pk]))
    assert 'class="confirmation">confirmed<' in review_page.content.decode()
    assert HumanAnswer.objects.filter(counted_human_answer_q(), pk=answer.pk).exists()

    # DEMOWORKER2 opens the prompt and leaves: the page offers to continue as them; the HIT
    # asked for two workers, so a third may not take it.
    client.get(client.post(start)["Location"])
    page = client.get(detail).content.decode()
    row = page.split(f"<code>{hit.hit_id}</code>")[1].split("</tr>")[0]
    assert '<td class="hit-work">1 / 1 / 2</td>' in row
    assert "2 of 2 took it on the platform" in row and f'action="{start}"' not in row
    section = page.split('id="demo-unfinished"')[1].split("</section>")[0]
    assert f"Prompt {hit.prompt.item}" in section and "Continue as DEMOWORKER2" in section
    full = client.post(start, follow=True)
    assert "Every worker this HIT asked for has taken it" in full.content.decode()

    on_link = Publication.objects.get(human_study=study, platform="selfhosted")
    page = client.get(reverse("crowd:publication", args=[on_link.pk])).content.decode()
    assert 'id="demo-worker-note"' not in page
    assert "the study's completion code <strong>FLIP-1</strong>" in page


def test_a_study_total_the_balance_cannot_pay_publishes_nothing_even_when_confirmed(
    client, study, settings, django_capture_on_commit_callbacks
):
    from annotate.crowd import fake

    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    with fake._changing() as store:
        store.balance = Decimal("0.30")  # less than the $0.50 the study costs
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(publish, publish_form(publish="1", confirm_total="0.50"))
    assert page.status_code == 200 and b"The balance does not cover this" in page.content
    assert not Publication.objects.exists() and fake.FakePlatform.store.hits == {}


def test_a_study_hit_reloaded_keeps_the_key_of_its_prompts_first_showing(
    client, study, settings, django_capture_on_commit_callbacks
):
    """The time an MTurk worker spends runs from the prompt's first showing in their tab, kept
    under the form's data-shown-key (answer.js). The key held the answer's address, whose
    signature carries the second it was made: a reload a few seconds later got a new key, so
    the clock started again (and keys piled up in the tab's storage)."""
    from unittest import mock

    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(publish, publish_form(publish="1", confirm_total="0.48"))
    hit = Publication.objects.get(human_study=study).hits.order_by("id").first()
    client.logout()

    def key_shown(worker_id, at):
        assignment = FakePlatform().worker_accept(hit_id=hit.hit_id, worker_id=worker_id)
        params = {"assignmentId": assignment, "hitId": hit.hit_id, "workerId": worker_id}
        url = reverse("verbalizer:crowd-mturk", args=[hit.unique_request_token])
        keys = []
        for seconds in at:
            with mock.patch("django.core.signing.time.time", return_value=seconds):
                page = client.get(url, {**params, "turkSubmitTo": "https://www.mturk.com"})
            assert page.status_code == 200
            keys.append(re.search(r'data-shown-key="([^"]+)"', page.content.decode()).group(1))
        return keys

    first, reloaded = key_shown("W1", at=(1_800_000_000, 1_800_000_005))
    assert first == reloaded
    (other,) = key_shown("W2", at=(1_800_000_005,))
    assert other != first  # another worker's assignment: a clock of its own


def test_a_study_hits_token_on_a_batchs_hit_page_is_404_not_a_server_error(
    client, study, settings, django_capture_on_commit_callbacks
):
    """A study's HIT has a prompt and no task; its token (in the ExternalQuestion URL every worker
    of the HIT reads) put in a batch HIT's page made a server error, preview or accepted."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("verbalizer:study-publish", args=[study.pk]),
            publish_form(publish="1", confirm_total="0.48"),
        )
    hit = Publication.objects.get(human_study=study, platform="fake").hits.order_by("id").first()
    opened = client.post(reverse("crowd:demo-worker", args=[hit.pk]))
    query = opened["Location"].split("?", 1)[1]
    batch_page = reverse("crowd:mturk-task", args=[hit.unique_request_token])
    client.logout()
    assert client.get(batch_page).status_code == 404  # the preview
    assert client.get(f"{batch_page}?{query}").status_code == 404  # the accepted HIT
    assert not HumanAnswer.objects.exists()


def test_a_demo_workers_done_page_names_no_path_as_a_form_action_source(
    client, study, settings, django_capture_on_commit_callbacks
):
    """The offline platform's turkSubmitTo is a path of this site, not a host: a study HIT's
    done page put it in the policy's form-action, which the browser reports as an invalid
    source on the console (and ignores). The page posts to this site, 'self', as an InFoBench
    HIT's does; an MTurk host is still added for MTurk's (test_worker_pages)."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(publish, publish_form(publish="1", confirm_total="0.48"))
    hit = Publication.objects.get(human_study=study).hits.order_by("id").first()
    opened = client.post(reverse("crowd:demo-worker", args=[hit.pk]))
    prompt_page = client.get(opened["Location"]).content.decode()
    action = re.search(r'<form method="post" action="([^"]+)" id="answer-form"', prompt_page)
    done = client.post(action.group(1), {"key": "1", "seconds": "2"})
    assert f'action="{reverse("crowd:demo-external-submit")}"' in done.content.decode()
    form_action = re.search(r"form-action ([^;]*)", done["Content-Security-Policy"]).group(1)
    assert form_action.split() == ["'self'"]


def test_a_studys_preview_counts_prompts_and_answers_and_names_its_other_platform(
    client, study, settings
):
    """The study's preview read "Tasks × assignments", a batch's words, and said nothing of
    the study being published on another platform already (which collects its own answers)."""
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish = reverse("verbalizer:study-publish", args=[study.pk])
    first = client.post(publish, publish_form(platform="selfhosted", preview="1")).text
    assert "Prompts × answers per prompt" in first and "Tasks × assignments" not in first
    assert "Answers to publish" in first and ">4 on 2 prompts<" in first
    assert "Reward per answer" in first and 'id="published-elsewhere"' not in first
    crowd.study_publication_create(
        study=study,
        platform_name="fake",
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )
    again = client.post(publish, publish_form(platform="selfhosted", preview="1")).text
    warning = again.split('id="published-elsewhere"', 1)[1].split("</p>", 1)[0]
    assert "is already published on " in warning
    assert "collects its own 2 answers per prompt" in warning
