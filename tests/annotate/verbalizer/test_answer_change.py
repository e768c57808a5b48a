"""An in-house annotator changes their last answer (a slip of the key) from the next prompt's
page: once, soon after, while the study is open, their own only; the first word and the time of
the change are kept. Any other change stays refused (409)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.errors import ConflictError, NotFoundError
from annotate.models import Annotator, AnnotatorKind
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services.humans import (
    CHANGE_WINDOW,
    human_answer_change,
    human_answer_submit,
    human_study_create,
)
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(db):
    fill("SST-2", [True, False, True])
    s = evaluation_set_create(
        name="s", datasets=["SST-2"], items=3, seed=1, mappings="all", modes=["direct"]
    ).evaluation_set
    return human_study_create(
        evaluation_set=s, name="flipped", mappings=["flipped-golden"], answers_per_prompt=2
    )


def _answer(client, study, key="1", seconds="2.5"):
    """Answer the prompt shown; return it and the next page (followed)."""
    prompt = client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
    page = client.post(
        reverse("verbalizer:work-answer", args=[study.pk]),
        {"prompt": prompt.pk, "key": key, "seconds": seconds},
        follow=True,
    )
    return prompt, page


def _change(client, study, prompt, key):
    url = reverse("verbalizer:work-answer-change", args=[study.pk])
    return client.post(url, {"prompt": prompt.pk, "key": key})


def test_an_annotator_changes_their_last_answer_from_the_next_page_and_it_is_recorded(
    client, annotator_user, study
):
    client.force_login(annotator_user)
    prompt, page = _answer(client, study, key="1", seconds="2.5")
    html = page.content.decode()
    assert "Saved: you answered “negative” to the last prompt." in html  # flipped golden
    # The control offers the other word, for this answer.
    assert 'id="change-answer">Change it to “positive”</button>' in html
    assert f'name="prompt" value="{prompt.pk}"' in html
    changed = _change(client, study, prompt, "2")
    assert changed.status_code == 302
    answer = HumanAnswer.objects.get()
    assert (answer.word, answer.changed_from, answer.seconds) == ("positive", "negative", 2.5)
    assert answer.changed_at is not None and answer.changed_at >= answer.created_at
    after = client.get(changed.url).content.decode()
    assert "Changed: you answered “positive” to the last prompt" in after
    assert "Change it" not in after  # once
    # Posted twice (a double click): nothing more changes; back again is refused.
    assert _change(client, study, prompt, "2").status_code == 302
    again = _change(client, study, prompt, "1")
    assert again.status_code == 409 and "answers change once" in again.content.decode()
    assert HumanAnswer.objects.get().word == "positive"
    # The counted progress is one answer, not two.
    assert client.get(changed.url).context["done"] == 1


def test_the_change_is_offered_wherever_the_last_answer_may_still_change(
    client, annotator_user, study
):
    """Not only on the page right after the answer: back on the study from the task list, or
    after logging in again, within the 5 minutes; and no more once they are over."""
    client.force_login(annotator_user)
    prompt, page = _answer(client, study, key="1")
    assert "Change it" in page.content.decode()
    client.logout()
    client.force_login(annotator_user)
    client.get(reverse("verbalizer:work-list"))
    again = client.get(reverse("verbalizer:work-next", args=[study.pk])).text
    assert 'id="change-answer">Change it to “positive”</button>' in again
    assert f'name="prompt" value="{prompt.pk}"' in again
    assert "Your last answer here was “negative”." in again
    HumanAnswer.objects.update(created_at=timezone.now() - CHANGE_WINDOW - timedelta(seconds=1))
    assert "Change it" not in client.get(reverse("verbalizer:work-next", args=[study.pk])).text


def test_an_older_answer_cannot_change(client, annotator_user, study):
    client.force_login(annotator_user)
    first, _ = _answer(client, study, key="1")
    second, page = _answer(client, study, key="1")
    refused = _change(client, study, first, "2")
    assert refused.status_code == 409
    assert "only your last answer can change" in refused.content.decode()
    assert HumanAnswer.objects.get(prompt=first).word == "negative"
    assert HumanAnswer.objects.get(prompt=first).changed_at is None
    # The next page offers the last answer only.
    assert f'name="prompt" value="{second.pk}"' in page.content.decode()


def test_an_answer_cannot_change_after_the_window(annotator_user, study):
    annotator = Annotator.objects.create(name="a", kind=AnnotatorKind.EXPERT)
    prompt = study.prompts.first()
    answer = human_answer_submit(
        study=study, prompt_id=prompt.pk, annotator=annotator, key=1, seconds=1.0
    )
    late = answer.created_at + CHANGE_WINDOW + timedelta(seconds=1)
    with pytest.raises(ConflictError, match="can change for 5 minutes"):
        human_answer_change(study=study, annotator=annotator, prompt_id=prompt.pk, key=2, now=late)
    in_time = answer.created_at + CHANGE_WINDOW
    changed = human_answer_change(
        study=study, annotator=annotator, prompt_id=prompt.pk, key=2, now=in_time
    )
    assert (changed.word, changed.changed_from, changed.changed_at) == (
        prompt.negative_word,
        prompt.positive_word,
        in_time,
    )


def test_another_annotators_answer_cannot_be_changed(client, annotator_user, study):
    client.force_login(annotator_user)
    prompt, _ = _answer(client, study, key="1")
    other = UserFactory(username="other", roles=["annotator"])
    client.force_login(other)
    refused = _change(client, study, prompt, "2")
    assert refused.status_code == 404
    answer = HumanAnswer.objects.get()
    assert (answer.word, answer.changed_at) == ("negative", None)


def test_a_crowd_workers_answer_cannot_change(study):
    worker = Annotator.objects.create(
        name="w", kind=AnnotatorKind.CROWD, platform="mturk", worker_id="AW1"
    )
    prompt = study.prompts.first()
    answer = HumanAnswer.objects.create(
        study=study, prompt=prompt, annotator=worker, word=prompt.positive_word, seconds=1.0,
        platform_assignment_id="ASSIGN1", platform_hit_id="HIT1",
    )  # fmt: skip
    with pytest.raises(ConflictError, match="part of a submitted HIT"):
        human_answer_change(
            study=study, annotator=worker, prompt_id=prompt.pk, key=2, now=answer.created_at
        )
    answer.refresh_from_db()
    assert (answer.word, answer.changed_at) == (prompt.positive_word, None)


def test_an_answer_in_a_closed_study_cannot_change(client, annotator_user, study):
    client.force_login(annotator_user)
    prompt, _ = _answer(client, study, key="1")
    study.active = False
    study.save()
    refused = _change(client, study, prompt, "2")
    assert refused.status_code == 409 and "study is closed" in refused.content.decode()
    assert HumanAnswer.objects.get().word == "negative"


def test_a_prompt_without_an_answer_of_theirs_is_not_found(annotator_user, study):
    annotator = Annotator.objects.create(name="a", kind=AnnotatorKind.EXPERT)
    with pytest.raises(NotFoundError):
        human_answer_change(
            study=study, annotator=annotator, prompt_id=study.prompts.first().pk, key=2,
            now=timezone.now(),
        )  # fmt: skip


def test_a_different_second_answer_is_still_refused(client, annotator_user, study):
    """The answer form itself still refuses a changed answer (409): only the change control,
    with its rules, changes one."""
    client.force_login(annotator_user)
    prompt, _ = _answer(client, study, key="1")
    refused = client.post(
        reverse("verbalizer:work-answer", args=[study.pk]), {"prompt": prompt.pk, "key": "2"}
    )
    assert refused.status_code == 409
    assert HumanAnswer.objects.get().word == "negative"


def test_answers_and_changes_are_limited_per_user_on_the_annotators_work_rate(
    client, annotator_user, study, worker_rates
):
    """An answer and a change count on the annotator's work rate (scope "annotator-work"): past
    it 429 with Retry-After, "Nothing was saved." and the way back to the study, and nothing
    stored or changed. Reading the next prompt is not counted."""
    clock = worker_rates(annotator_work="2/minute")
    client.force_login(annotator_user)
    prompt, page = _answer(client, study, key="1")  # 1, and the next prompt read
    assert page.status_code == 200 and "Saved: you answered" in page.content.decode()
    assert _change(client, study, prompt, "2").status_code == 302  # 2
    clock[0] += 20
    following = client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
    refused = client.post(
        reverse("verbalizer:work-answer", args=[study.pk]), {"prompt": following.pk, "key": "1"}
    )
    html = refused.content.decode()
    assert refused.status_code == 429 and refused["Retry-After"] == "40"
    assert (
        "Too many work requests from your account (at most 2/minute). Please wait 40 s and try "
        "again. Nothing was saved." in html
    )
    onward = reverse("verbalizer:work-next", args=[study.pk])
    assert f'href="{onward}">Go on with this study</a>' in html
    assert HumanAnswer.objects.count() == 1
    refused_change = _change(client, study, prompt, "1")
    assert refused_change.status_code == 429
    assert HumanAnswer.objects.get().word == "positive"
    # Another annotator answers meanwhile.
    client.force_login(UserFactory(username="other", roles=["annotator"]))
    assert _answer(client, study)[1].status_code == 200
    assert HumanAnswer.objects.count() == 2
