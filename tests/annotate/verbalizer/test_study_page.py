"""A human study's page for its researchers: settings, progress per channel and group, each
prompt's answers, and who answered (crowd workers named only to whom the app names them)."""

import pytest
from django.urls import reverse

from annotate.models import Annotator
from annotate.roles import ADMIN, RESEARCHER
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services.humans import human_study_create
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def make_study(items: int, *, name: str = "s", created_by=None):
    """`items` SST-2 items under golden (natural), foo|bar (neutral) and flipped golden
    (unnatural), direct: 3 prompts per item, 2 answers wanted per prompt and channel."""
    fill(f"SST-2 {name}", [i % 2 == 0 for i in range(items)])
    evaluation_set = evaluation_set_create(
        name=name, datasets=[f"SST-2 {name}"], items=items, seed=1,
        mappings="golden,foo|bar,flipped-golden", modes=["direct"],
    ).evaluation_set  # fmt: skip
    return human_study_create(
        evaluation_set=evaluation_set, name=f"study {name}", answers_per_prompt=2,
        created_by=created_by,
    )  # fmt: skip


def person(name: str, kind: str, *, platform: str = "", worker_id: str = "") -> Annotator:
    return Annotator.objects.create(name=name, kind=kind, platform=platform, worker_id=worker_id)


def answer(study, prompt, annotator, *, status: str = "submitted") -> HumanAnswer:
    return HumanAnswer.objects.create(
        study=study, prompt=prompt, annotator=annotator, word=prompt.positive_word, status=status
    )


def page_of(client, study, **params):
    return client.get(reverse("verbalizer:study-detail", args=[study.pk]), params)


def test_the_set_page_links_each_study_to_its_page(client, researcher):
    study = make_study(1)
    client.force_login(researcher)
    page = client.get(reverse("verbalizer:set-detail", args=[study.evaluation_set_id]))
    link = f'<a href="{reverse("verbalizer:study-detail", args=[study.pk])}">study s</a>'
    assert link in page.content.decode()


def test_a_researcher_reads_progress_per_channel_and_group_and_who_answered(client, researcher):
    study = make_study(2)  # 6 prompts
    prompts = list(study.prompts.order_by("pk"))
    natural = [p for p in prompts if p.mapping.group == "natural"]
    unnatural = [p for p in prompts if p.mapping.group == "unnatural"]
    ann, bob = person("ann", "expert"), person("bob", "expert")
    newcomer = person("newcomer", "undecided")
    worker = person("selfhosted:P-1", "crowd", platform="selfhosted", worker_id="P-1")
    answer(study, natural[0], ann)
    answer(study, natural[0], bob)  # natural[0]: in-house full
    answer(study, natural[1], ann)
    answer(study, natural[1], newcomer)  # fills no place: kind not decided
    answer(study, unnatural[0], bob, status="rejected")  # fills no place
    answer(study, unnatural[0], worker)
    client.force_login(researcher)
    page = page_of(client, study)
    assert page.status_code == 200
    progress = page.context["progress"]
    by_channel = {
        c.label: (c.prompts_done, c.prompts, c.answers, c.wanted) for c in progress.channels
    }
    assert by_channel == {"In-house": (1, 6, 3, 12), "Self-hosted link": (0, 6, 1, 12)}
    assert [(g, n) for g, _, n in progress.groups] == [
        ("natural", 3), ("neutral", 0), ("unnatural", 1)
    ]  # fmt: skip
    assert (progress.answers, progress.outside) == (6, 2)
    people = {r.name: (r.channel, r.answers, r.rejected) for r in progress.annotators}
    assert people == {
        "ann": ("", 2, 0), "bob": ("", 2, 1), "newcomer": (None, 1, 0),
        f"crowd-worker-{worker.pk}": ("selfhosted", 1, 0),
    }  # fmt: skip
    html = page.content.decode()
    assert "<td>In-house</td><td>1 / 6</td><td>3 / 12</td>" in html
    counts = dict((p.pk, c) for p, c in page.context["rows"])
    assert counts[natural[0].pk] == [2, 0] and counts[unnatural[0].pk] == [0, 1]
    for url in (
        reverse("verbalizer:set-detail", args=[study.evaluation_set_id]),
        reverse("verbalizer-reports:detail", args=[study.evaluation_set_id]),
        reverse("verbalizer-reports:human-answers", args=[study.evaluation_set_id]),
    ):
        assert f'href="{url}"' in html
    # Every prompt still wants answers from the link's participants.
    assert page_of(client, study, needing="1").context["page"].paginator.count == 6


def test_the_prompts_still_wanting_answers_are_listed_alone(client, researcher):
    study = make_study(1)  # 3 prompts, in-house only
    prompts = list(study.prompts.order_by("pk"))
    ann, bob = person("ann", "expert"), person("bob", "expert")
    for p in prompts[:2]:
        answer(study, p, ann)
        answer(study, p, bob)
    client.force_login(researcher)
    page = page_of(client, study, needing="1")
    assert [p.pk for p, _ in page.context["rows"]] == [prompts[2].pk]
    assert "1 of 3 prompts still want answers" in page.content.decode()
    answer(study, prompts[2], ann)
    answer(study, prompts[2], bob)
    assert "Every prompt has its answers." in page_of(client, study, needing="1").content.decode()


def test_crowd_workers_are_named_only_to_admins_and_to_whom_made_the_study(client):
    maker = UserFactory(username="maker", roles=[RESEARCHER])
    study = make_study(1, created_by=maker)
    worker = person("mturk:AREAL1", "crowd", platform="mturk", worker_id="AREAL1")
    answer(study, study.prompts.first(), worker)

    def names(user) -> set[str]:
        client.force_login(user)
        return {row.name for row in page_of(client, study).context["progress"].annotators}

    admin = UserFactory(username="boss", roles=[ADMIN], is_staff=True)
    other = UserFactory(username="other", roles=[RESEARCHER])
    assert names(admin) == names(maker) == {"mturk:AREAL1"}
    assert names(other) == {f"crowd-worker-{worker.pk}"}
    assert "AREAL1" not in page_of(client, study).content.decode()


def test_annotators_do_not_open_a_studys_page(client, annotator_user):
    study = make_study(1)
    answer(study, study.prompts.first(), person("zelda-expert", "expert"))
    client.force_login(annotator_user)
    page = page_of(client, study)
    assert page.status_code == 403 and b"zelda-expert" not in page.content.split(b'id="main"')[-1]


def fill_answers(study, n_people: int) -> None:
    crowd = [
        person(f"mturk:W{study.pk}-{i}", "crowd", platform="mturk", worker_id=f"W{study.pk}-{i}")
        for i in range(n_people)
    ]
    experts = [person(f"e{study.pk}-{i}", "expert") for i in range(n_people)]
    for prompt in study.prompts.all():
        for annotator in (*crowd[:2], *experts[:2]):
            answer(study, prompt, annotator)


@pytest.mark.parametrize("role", [RESEARCHER, ADMIN])
def test_the_study_page_runs_as_many_queries_whatever_the_studys_size(
    client, django_assert_num_queries, role
):
    small, large = make_study(1, name="small"), make_study(40, name="large")  # 3 and 120 prompts
    fill_answers(small, 2)
    fill_answers(large, 30)
    client.force_login(UserFactory(username="viewer", roles=[role], is_staff=role == ADMIN))
    # Session, user, the role checks, the study, its publications, its answers, its prompts'
    # ids, the page's prompts; a researcher's identity scope is one more.
    expected = 12 if role == RESEARCHER else 11
    for study in (small, large):
        with django_assert_num_queries(expected):
            assert page_of(client, study).status_code == 200
