import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils.html import escape

from annotate.roles import ANNOTATOR
from annotate.verbalizer.models import ClassificationDataset, HumanAnswer, HumanStudy, Mapping
from annotate.verbalizer.services.humans import human_study_create
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(db):
    fill("SST-2", [True, False, True])
    s = evaluation_set_create(
        name="s", datasets=["SST-2"], items=3, seed=1, mappings="all", modes=["direct", "cot"]
    ).evaluation_set
    return human_study_create(
        evaluation_set=s, name="flipped", mappings=["flipped-golden"], items_per_dataset=2,
        answers_per_prompt=2,
    )  # fmt: skip


def test_researcher_adds_a_mapping_and_a_dataset(client, researcher):
    client.force_login(researcher)
    page = client.get(reverse("verbalizer:overview"))
    assert b"flipped-golden" in page.content and b"SST-2" in page.content
    client.post(
        reverse("verbalizer:overview"),
        {"m-group": "neutral", "m-positive_word": "cat", "m-negative_word": "dog"},
    )
    assert Mapping.objects.get(name="cat|dog").words_for(None) == ("cat", "dog")
    client.post(
        reverse("verbalizer:overview"),
        {"d-name": "IMDB", "d-family": "sentiment", "d-positive_name": "good",
         "d-negative_name": "bad"},
    )  # fmt: skip
    assert ClassificationDataset.objects.get(name="IMDB").positive_name == "good"
    again = client.post(
        reverse("verbalizer:overview"),
        {"m-group": "neutral", "m-positive_word": "cat", "m-negative_word": "dog"},
    )
    assert again.status_code == 400 and b"exists already" in again.content


def test_researcher_imports_items_and_makes_a_set_from_the_page(client, researcher):
    """Without manage.py: a dataset's items from a file (a bad file names its line and writes
    nothing), then an evaluation set of them under every mapping."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotate.verbalizer.models import ClassificationItem, EvaluationSet

    client.force_login(researcher)
    page = client.get(reverse("verbalizer:overview")).content.decode()
    assert "Import a dataset's items" in page and "No dataset has items yet" in page
    # A filled dataset takes no more items: the form says so before anyone tries.
    assert "A dataset takes the items of one file, once" in page
    overview = reverse("verbalizer:overview")
    bad = SimpleUploadedFile("dev.tsv", b"sentence\tlabel\ngood film\t1\nbad film\t7\n")
    refused = client.post(
        overview, {"i-dataset": "SST-2", "i-format": "glue-sst2", "i-upload": bad}
    )
    text = refused.content.decode()
    assert refused.status_code == 400 and "dev.tsv, line 3, field &#x27;label&#x27;" in text
    assert "Nothing was written." in text and not ClassificationItem.objects.exists()
    rows = "".join(f"film {i}\t{i % 2}\n" for i in range(6))
    good = SimpleUploadedFile("dev.tsv", f"sentence\tlabel\n{rows}".encode())
    done = client.post(
        overview, {"i-dataset": "SST-2", "i-format": "glue-sst2", "i-upload": good}, follow=True
    )
    assert "Imported 6 items into SST-2 from dev.tsv" in done.content.decode()
    assert ClassificationItem.objects.filter(dataset__name="SST-2").count() == 6
    made = client.post(
        overview,
        {"s-name": "web set", "s-datasets": ["SST-2"], "s-items": "4", "s-seed": "2",
         "s-modes": ["direct"]},
    )  # fmt: skip
    evaluation_set = EvaluationSet.objects.get(name="web set")
    assert made.url == reverse("verbalizer:set-detail", args=[evaluation_set.pk])
    mappings = evaluation_set.mappings.count()
    assert mappings >= 3 and evaluation_set.prompts.count() == 4 * mappings
    again = client.post(
        overview,
        {"s-name": "web set", "s-datasets": ["SST-2"], "s-items": "4", "s-seed": "2",
         "s-modes": ["direct"]},
    )  # fmt: skip
    assert again.status_code == 400 and "exists already" in again.content.decode()


def test_annotators_cannot_see_the_researcher_pages(client, annotator_user, study):
    client.force_login(annotator_user)
    # A role error is the 403 page in the site's layout.
    assert client.get(reverse("verbalizer:overview")).status_code == 403
    assert (
        client.get(reverse("verbalizer:set-detail", args=[study.evaluation_set_id])).status_code
        == 403
    )
    url = reverse("verbalizer-reports:detail", args=[study.evaluation_set_id])
    assert client.get(url).status_code == 403


def test_study_slice_holds_the_first_items_of_the_mapping_and_mode(study):
    prompts = list(study.prompts.all())
    assert len(prompts) == 2
    assert {(p.mapping.name, p.mode) for p in prompts} == {("flipped-golden", "direct")}


def test_annotator_answers_with_keys_and_sees_only_own_progress(client, annotator_user, study):
    client.force_login(annotator_user)
    page = client.get(reverse("verbalizer:work-next", args=[study.pk]))
    prompt = page.context["prompt"]
    assert prompt.text.encode() in page.content.replace(b"&quot;", b'"').replace(b"&#x27;", b"'")
    assert b"<kbd>1</kbd> negative" in page.content  # flipped golden: key 1 is the first word
    client.post(
        reverse("verbalizer:work-answer", args=[study.pk]),
        {"prompt": prompt.pk, "key": "2", "seconds": "2.5"},
    )
    answer = HumanAnswer.objects.get()
    assert (answer.word, answer.seconds, answer.prompt_id) == ("positive", 2.5, prompt.pk)
    following = client.get(reverse("verbalizer:work-next", args=[study.pk]))
    assert following.context["prompt"].pk != prompt.pk
    assert following.context["done"] == 1
    other = UserFactory(username="other", roles=["annotator"])
    client.force_login(other)
    theirs = client.get(reverse("verbalizer:work-next", args=[study.pk]))
    assert theirs.context["done"] == 0
    # A changed answer to the same prompt is refused; the first stays.
    client.force_login(annotator_user)
    refused = client.post(
        reverse("verbalizer:work-answer", args=[study.pk]), {"prompt": prompt.pk, "key": "1"}
    )
    assert refused.status_code == 409
    assert HumanAnswer.objects.get().word == "positive"
    # The page leads back to the study (a stale tab, a slip of the key), not only home.
    onward = reverse("verbalizer:work-next", args=[study.pk])
    assert f'href="{onward}">Go on with this study</a>' in refused.content.decode()


def test_no_answer_page_of_an_annotator_may_be_kept_by_a_browser_or_proxy(
    client, annotator_user, study
):
    """As the task pages: the back button of a shared computer (or a proxy) must not show the
    next person an annotator's prompts, answers or progress."""
    client.force_login(annotator_user)
    next_url = reverse("verbalizer:work-next", args=[study.pk])
    answer_url = reverse("verbalizer:work-answer", args=[study.pk])
    page = client.get(next_url)
    prompt = page.context["prompt"]
    answered = client.post(answer_url, {"prompt": prompt.pk, "key": "2"})
    refused = client.post(answer_url, {"prompt": prompt.pk, "key": "1"})
    assert (answered.status_code, refused.status_code) == (302, 409)
    pages = [client.get(reverse("verbalizer:work-list")), page, answered, refused]
    pages.append(client.get(next_url))
    for shown in pages:
        assert "no-store" in shown["Cache-Control"] and "private" in shown["Cache-Control"]


def test_a_prompt_is_offered_until_enough_people_answered(client, study):
    """Two answers per prompt: the experts' count; a new account's (kind not decided, so
    counted nowhere) leave the prompt open to the next person."""
    from annotate.models import Annotator

    people = [UserFactory(username=f"a{i}", roles=["annotator"]) for i in range(4)]
    for person in people[:2]:
        Annotator.objects.create(user=person, name=person.username, kind="expert")
    newcomer = people[3]  # its Annotator is made on its first page, undecided

    def answer_all(person):
        client.force_login(person)
        for _ in range(2):
            prompt = client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
            client.post(
                reverse("verbalizer:work-answer", args=[study.pk]),
                {"prompt": prompt.pk, "key": "1"},
            )

    answer_all(people[0])
    answer_all(newcomer)
    client.force_login(people[2])  # one expert answer each so far: still open
    assert client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
    answer_all(people[1])
    client.force_login(people[2])
    page = client.get(reverse("verbalizer:work-next", args=[study.pk]))
    assert page.context["prompt"] is None and b"Nothing left" in page.content


def test_an_answer_to_a_prompt_with_its_answers_is_refused_though_posted_directly(client, study):
    """The page stops offering a prompt once it has its answers; an answer posted to it anyway
    (a hand-made request) is refused as a self-hosted participant's is, and writes nothing, so
    no prompt gets more in-house answers than the study asks for."""
    from annotate.models import Annotator

    people = [UserFactory(username=f"e{i}", roles=["annotator"]) for i in range(3)]
    for person in people:
        Annotator.objects.create(user=person, name=person.username, kind="expert")
    prompt = study.prompts.first()
    url = reverse("verbalizer:work-answer", args=[study.pk])
    for person in people[:2]:
        client.force_login(person)
        assert client.post(url, {"prompt": prompt.pk, "key": "1"}).status_code == 302
    client.force_login(people[2])
    offered = client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
    assert offered.pk != prompt.pk
    refused = client.post(url, {"prompt": prompt.pk, "key": "2"})
    assert refused.status_code == 409 and "has all the answers it needs" in refused.text
    assert study.answers.filter(prompt=prompt).count() == 2
    # One of the two sending the same answer again (a double submit) is not refused.
    client.force_login(people[0])
    assert client.post(url, {"prompt": prompt.pk, "key": "1"}).status_code == 302


def test_researcher_publishes_a_slice_from_the_set_page(client, researcher, study):
    client.force_login(researcher)
    url = reverse("verbalizer:set-detail", args=[study.evaluation_set_id])
    client.post(
        url,
        {"study-name": "unnatural", "study-mappings": ["0|1", "no|yes"], "study-modes": ["cot"],
         "study-answers_per_prompt": "1", "study-completion_code": "DONE-7"},
    )  # fmt: skip
    page = client.get(url)
    assert b"unnatural" in page.content
    made = HumanStudy.objects.get(name="unnatural")
    assert made.prompts.count() == 3 * 2 and made.completion_code == "DONE-7"
    # A completion URL that is not an address is refused on the form; nothing is made.
    refused = client.post(
        url, {"study-name": "bad-url", "study-modes": ["cot"], "study-answers_per_prompt": "1",
              "study-completion_url": "not a url"},
    )  # fmt: skip
    assert refused.status_code == 400 and "Enter a valid URL." in refused.text
    assert not HumanStudy.objects.filter(name="bad-url").exists()


def test_pages_use_a_bounded_number_of_queries(
    client, researcher, annotator_user, study, django_assert_max_num_queries
):
    client.force_login(annotator_user)
    # The first visit also creates the annotator's record (4 queries), and reads their block.
    with django_assert_max_num_queries(15):
        assert client.get(reverse("verbalizer:work-next", args=[study.pk])).status_code == 200
    client.force_login(researcher)
    with django_assert_max_num_queries(20):
        page = client.get(reverse("verbalizer:set-detail", args=[study.evaluation_set_id]))
    assert page.status_code == 200
    with django_assert_max_num_queries(12):
        assert client.get(reverse("verbalizer:overview")).status_code == 200


def test_only_active_annotators_open_the_answer_page(client, researcher, annotator_user, study):
    url = reverse("verbalizer:work-next", args=[study.pk])
    client.force_login(researcher)
    assert client.get(url).status_code == 403
    client.force_login(annotator_user)
    assert client.get(url).status_code == 200  # now a returning annotator
    annotator_user.groups.clear()  # no longer an annotator: refused though known
    assert client.get(url).status_code == 403
    annotator_user.groups.add(Group.objects.get(name=ANNOTATOR))
    assert client.get(url).status_code == 200
    annotator_user.is_active = False
    annotator_user.save()
    client.force_login(annotator_user)
    assert client.get(url).status_code != 200


def test_answer_page_of_a_returning_annotator_runs_a_fixed_number_of_queries(
    client, annotator_user, study, django_assert_num_queries
):
    client.force_login(annotator_user)
    url = reverse("verbalizer:work-next", args=[study.pk])
    client.get(url)  # the first visit creates the annotator's record
    # session, user, the annotator with its role, the study, the annotator's block (a blocked
    # account is told so, not shown a prompt its answer would be refused on), the next prompt
    # with the annotator's answers and the study's prompts, that prompt, the navigation's roles
    with django_assert_num_queries(8):
        page = client.get(url)
    assert page.status_code == 200
    assert f"You answered 0 of {study.prompts.count()}." in page.text


def test_study_command_publishes_the_papers_slice(capsys):
    from django.core.management import CommandError, call_command

    fill("SST-2", [True, False] * 3)
    fill("RTE", [True, False] * 3, text_b="h")
    evaluation_set_create(
        name="p", datasets=["SST-2", "RTE"], items=6, seed=3, mappings="unnatural"
    )
    call_command(
        "verbalizer_study", "flip", "--set", "p", "--datasets", "SST-2,RTE",
        "--mappings", "flipped-golden", "--items", "4", "--answers", "3",
        "--completion-code", "CC-1",
    )  # fmt: skip
    assert "8 prompts, 3 answers each" in capsys.readouterr().out
    assert HumanStudy.objects.get(name="flip").completion_code == "CC-1"
    with pytest.raises(CommandError, match="completion URL: 'ftp://x' is not an http"):
        call_command("verbalizer_study", "ftp", "--set", "p", "--completion-url", "ftp://x")
    # A name the set does not hold is named, with what the set has: "no prompt of the set
    # matches" left the researcher to guess which filter was wrong.
    with pytest.raises(CommandError) as refused:
        call_command("verbalizer_study", "none", "--set", "p", "--mappings", "golden")
    assert str(refused.value) == (
        "mappings: the set 'p' has no 'golden'; it has flipped-golden, 0|1, no|yes"
    )
    with pytest.raises(
        CommandError, match="datasets: the set 'p' has no 'SST2'; it has RTE, SST-2"
    ):
        call_command("verbalizer_study", "none", "--set", "p", "--datasets", "SST2")
    with pytest.raises(CommandError, match="modes: the set 'p' has no 'cot'; it has direct"):
        call_command("verbalizer_study", "none", "--set", "p", "--modes", "cot")
    with pytest.raises(CommandError, match="items per dataset: at least 1"):
        call_command("verbalizer_study", "none", "--set", "p", "--items", "0")
    assert not HumanStudy.objects.filter(name="none").exists()


def test_each_annotator_meets_the_prompts_in_an_order_of_their_own(client):
    """In id order every reader met an item under golden and at once under flipped golden (the
    second answer primed by the first): each annotator now has an order of their own, the same
    on every reload."""
    fill("SST-2", [True, False] * 10)
    evaluation_set = evaluation_set_create(
        name="order", datasets=["SST-2"], items=20, seed=1, mappings="all", modes=["direct"]
    ).evaluation_set
    study = human_study_create(
        evaluation_set=evaluation_set, name="two", mappings=["golden", "flipped-golden"],
        items_per_dataset=20, answers_per_prompt=3,
    )  # fmt: skip
    prompts = {p.pk: p for p in study.prompts.all()}
    assert len(prompts) == 40
    orders = []
    for name in ("r1", "r2"):
        client.force_login(UserFactory(username=name, roles=[ANNOTATOR]))
        seen = []
        for _ in range(len(prompts)):
            url = reverse("verbalizer:work-next", args=[study.pk])
            prompt = client.get(url).context["prompt"]
            assert client.get(url).context["prompt"].pk == prompt.pk  # a reload: the same one
            seen.append(prompt.pk)
            client.post(
                reverse("verbalizer:work-answer", args=[study.pk]),
                {"prompt": prompt.pk, "key": "1"},
            )
        assert sorted(seen) == sorted(prompts)  # every prompt once
        orders.append(seen)
    assert orders[0] != orders[1] and orders[0] != sorted(orders[0])
    for seen in orders:  # an item's two verbalizers rarely follow each other (id order: 20)
        items = [prompts[pk].item_id for pk in seen]
        assert sum(a == b for a, b in zip(items, items[1:], strict=False)) <= 5


def _answer_next(client, study) -> int | None:
    """Answer the annotator's next prompt of the study with key 1; its id, None when done."""
    prompt = client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
    if prompt is None:
        return None
    client.post(
        reverse("verbalizer:work-answer", args=[study.pk]), {"prompt": prompt.pk, "key": "1"}
    )
    return prompt.pk


def test_a_person_meets_an_items_verbalizers_as_far_apart_as_the_study_allows():
    """A reader met an item under golden and flipped golden within three prompts, the second
    answer primed by the first: now, among prompts equally answered, each person goes in rounds
    of one prompt per item, in an order of the items of their own, so an item's prompts are N
    prompts apart in a study of N items, the most M prompts of each among N * M allow; with
    answers of others in between, the least answered prompt still comes first."""
    from django.test import Client

    from annotate.models import Annotator

    items, mappings = 6, ["golden", "flipped-golden", "0|1"]
    fill("SST-2", [True, False] * (items // 2))
    evaluation_set = evaluation_set_create(
        name="spaced", datasets=["SST-2"], items=items, seed=1, mappings="all", modes=["direct"]
    ).evaluation_set
    study = human_study_create(
        evaluation_set=evaluation_set, name="three", mappings=mappings, answers_per_prompt=4
    )
    item_of = dict(study.prompts.values_list("pk", "item_id"))
    assert len(item_of) == items * len(mappings)

    def min_distance(seen: list[int]) -> int:
        last, gaps = {}, []
        for index, pk in enumerate(seen):
            if item_of[pk] in last:
                gaps.append(index - last[item_of[pk]])
            last[item_of[pk]] = index
        return min(gaps)

    readers = []
    for name in ("alone", "after", "mixed-1", "mixed-2"):
        person = UserFactory(username=name, roles=[ANNOTATOR])
        Annotator.objects.create(user=person, name=name, kind="expert")  # their answers count
        readers.append(Client())
        readers[-1].force_login(person)
    orders = []
    for reader in readers[:2]:  # one after the other: every count even within a round
        seen = list(iter(lambda reader=reader: _answer_next(reader, study), None))
        assert sorted(seen) == sorted(item_of)
        assert min_distance(seen) == items
        orders.append(seen)
    assert orders[0] != orders[1]  # an order of their own
    mixed = [[], []]
    while True:  # two at once: the answers of one change the counts the other's choice reads
        taken = [_answer_next(reader, study) for reader in readers[2:]]
        if taken == [None, None]:
            break
        for seen, pk in zip(mixed, taken, strict=True):
            seen += [pk] if pk else []
    for seen in mixed:
        assert sorted(seen) == sorted(item_of)


def test_the_least_answered_prompt_comes_first_whatever_the_round():
    """The rounds came before the counts: people were offered a prompt someone had answered
    while its item's other prompt had no answer (a later round of theirs), so a study closed
    early held verbalizers answered on different items."""
    from annotate.models import Annotator
    from annotate.verbalizer.services.humans import human_work_next

    fill("SST-2", [True])
    evaluation_set = evaluation_set_create(
        name="one", datasets=["SST-2"], items=1, seed=1, mappings="all", modes=["direct"]
    ).evaluation_set
    study = human_study_create(
        evaluation_set=evaluation_set,
        name="two",
        mappings=["golden", "flipped-golden"],
        answers_per_prompt=3,
    )
    people = []
    for k in range(12):
        user = UserFactory(username=f"p{k}", roles=[ANNOTATOR])
        people.append(Annotator.objects.create(user=user, name=f"p{k}", kind="expert"))
    first, _, _ = human_work_next(study=study, annotator=people[0])
    HumanAnswer.objects.create(study=study, prompt=first, annotator=people[0], word="x")
    offered = {human_work_next(study=study, annotator=p)[0].pk for p in people[1:]}
    (other,) = set(study.prompts.values_list("pk", flat=True)) - {first.pk}
    assert offered == {other}


def _main_nav(html: str) -> str:
    return html.split('<nav aria-label="Main"', 1)[1].split("</nav>", 1)[0]


def test_set_and_answer_pages_keep_their_way_back_out_of_the_main_navigation(
    client, researcher, annotator_user, study
):
    """The main navigation holds the role's sections only (config/navigation.py): a page's way
    back is a link above its heading, as on the other pages, not an unlabelled extra link
    wrapped under the sections."""
    client.force_login(researcher)
    page = client.get(reverse("verbalizer:set-detail", args=[study.evaluation_set_id]))
    html = page.content.decode()
    assert _main_nav(html).count("<a ") == _main_nav(html).count("data-section=")
    assert f'<p><a href="{reverse("verbalizer:overview")}">← Verbalizer</a></p>' in html
    client.force_login(annotator_user)
    html = client.get(reverse("verbalizer:work-next", args=[study.pk])).content.decode()
    assert _main_nav(html).count("<a ") == _main_nav(html).count("data-section=")
    assert f'<p><a href="{reverse("verbalizer:work-list")}">← Label-word tasks</a></p>' in html


def test_a_finished_study_points_to_the_annotators_next_one_or_says_there_is_none(
    client, annotator_user, study
):
    """The page after a study's last answer said only "Nothing left for you in this study":
    the annotator had to find their next study themselves (and learn there was none)."""
    other = human_study_create(
        evaluation_set=study.evaluation_set, name="golden", mappings=["golden"],
        items_per_dataset=1, answers_per_prompt=2,
    )  # fmt: skip
    client.force_login(annotator_user)

    def answer_everything(of):
        url = reverse("verbalizer:work-next", args=[of.pk])
        while (page := client.get(url)).context["prompt"] is not None:
            prompt = page.context["prompt"]
            client.post(reverse("verbalizer:work-answer", args=[of.pk]),
                        {"prompt": prompt.pk, "key": "1"})  # fmt: skip
        return page.text

    finished = answer_everything(study)
    onward = reverse("verbalizer:work-next", args=[other.pk])
    assert "Nothing left for you in this study." in finished
    assert f'<a href="{onward}">golden</a> — you answered 0 of {other.prompts.count()}' in finished
    assert "No other study has prompts for you" not in finished
    last = answer_everything(other)
    assert "No other study has prompts for you right now." in last
    assert f'href="{reverse("verbalizer:work-next", args=[study.pk])}"' not in last
    assert f'href="{reverse("verbalizer:work-list")}">Back to your label-word tasks</a>' in last


def test_study_command_counts_one_prompt_and_one_answer_in_the_singular(capsys):
    """It said "2 prompts, 1 answers each"."""
    from django.core.management import call_command

    fill("SST-2", [True, False] * 3)
    evaluation_set_create(name="p", datasets=["SST-2"], items=6, seed=3, mappings="unnatural")
    call_command(
        "verbalizer_study", "one", "--set", "p", "--datasets", "SST-2",
        "--mappings", "flipped-golden", "--items", "1", "--answers", "1",
    )  # fmt: skip
    assert "Study one: 1 prompt, 1 answer each;" in capsys.readouterr().out


def test_researcher_reads_the_sets_prompts_before_anything_is_asked(
    client, researcher, annotator_user, study, django_assert_max_num_queries
):
    """The set page links every rendered prompt, filterable by dataset, group, mapping and mode:
    a researcher checks the label words of natural, neutral and flipped prompts before a run or
    a study asks them (annotators may not read the prompts a study has not shown them)."""
    evaluation_set = study.evaluation_set
    url = reverse("verbalizer:set-prompts", args=[evaluation_set.pk])
    client.force_login(researcher)
    set_page = client.get(reverse("verbalizer:set-detail", args=[evaluation_set.pk]))
    assert f'href="{url}" id="read-prompts"' in set_page.content.decode()
    with django_assert_max_num_queries(10):
        page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "72 prompts." in html  # 3 items x 12 mappings x 2 modes
    flipped = client.get(url, {"mapping": "Flipped-Golden", "mode": "direct"}).content.decode()
    assert "3 prompts match the filters." in flipped
    item = evaluation_set.prompts.get(
        mapping__name="flipped-golden", mode="direct", item__position=1
    )
    assert "<td>negative | positive</td><td>negative</td>" in flipped  # item 1 is positive
    assert escape(item.text) in flipped and 'value="flipped-golden" selected' in flipped
    neutral = client.get(url, {"group": "neutral", "mode": "direct"}).content.decode()
    assert "18 prompts match the filters." in neutral and "foo | bar" in neutral
    assert "No prompt matches" in client.get(url, {"dataset": "RTE"}).content.decode()
    client.force_login(annotator_user)
    assert client.get(url).status_code == 403


def test_the_import_form_offers_the_dataset_just_added(client, researcher, study):
    """After "Add dataset" the import form has the new dataset chosen (the next step), and
    otherwise a dataset still empty, never one whose items are in already (it would refuse)."""
    client.force_login(researcher)
    added = client.post(
        reverse("verbalizer:overview"),
        {"d-name": "IMDB", "d-family": "sentiment", "d-positive_name": "good",
         "d-negative_name": "bad"},
        follow=True,
    )  # fmt: skip
    html = added.content.decode()
    assert "Dataset IMDB added: import its items below." in html
    assert added.redirect_chain[-1][0].endswith("?dataset=IMDB#add-items")
    assert '<option value="IMDB" selected>' in html
    plain = client.get(reverse("verbalizer:overview")).content.decode()
    assert '<option value="SST-2" selected>' not in plain  # SST-2 holds the study's items
    assert '<option value="EMOTION" selected>' in plain  # the first dataset still empty


def test_set_page_forms_name_each_mappings_group_and_each_mode(client, researcher, study):
    """Publishing a slice, the researcher picks mappings by group (natural, neutral, unnatural:
    the paper's comparison) and reads what a blank item count means; both forms name the modes
    alike ("Zero-shot chain of thought", not the stored "cot")."""
    client.force_login(researcher)
    html = client.get(reverse("verbalizer:set-detail", args=[study.evaluation_set_id])).text
    for label in ("golden (natural)", "foo|bar (neutral)", "flipped-golden (unnatural)"):
        assert f"\n {label}</label>" in html
    assert "Blank: all of them." in html
    assert html.count("\n Zero-shot chain of thought</label>") == 2  # the run's and the study's
    assert "\n cot</label>" not in html


def test_report_says_what_n_counts(client, researcher, study):
    client.force_login(researcher)
    html = client.get(reverse("verbalizer-reports:detail", args=[study.evaluation_set_id])).text
    assert "two people on 6 prompts are 12" in html


def test_the_next_prompt_says_the_last_answer_was_saved_and_as_which_word(
    client, annotator_user, study
):
    """The page turned to the next prompt with no word of the last one: an annotator (or a
    screen reader, the message being a status) could not tell a key was taken, nor which."""
    client.force_login(annotator_user)
    prompt = client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
    answered = client.post(
        reverse("verbalizer:work-answer", args=[study.pk]),
        {"prompt": prompt.pk, "key": "1", "seconds": "1.5"},
        follow=True,
    )
    html = answered.content.decode()
    assert '<ul class="messages" role="status">' in html
    assert "Saved: you answered “negative” to the last prompt." in html  # flipped golden: key 1
    assert "Saved:" not in client.get(reverse("verbalizer:work-next", args=[study.pk])).text


def test_a_researcher_closes_a_study_to_annotators_and_opens_it_again(
    client, researcher, annotator_user, study
):
    """A study published by mistake (a wrong slice) stayed on every annotator's list: only the
    Django admin could close it. Closing keeps the answers given (the report reads them)."""
    client.force_login(annotator_user)
    prompt = client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
    client.post(
        reverse("verbalizer:work-answer", args=[study.pk]), {"prompt": prompt.pk, "key": "1"}
    )
    set_url = reverse("verbalizer:set-detail", args=[study.evaluation_set_id])
    client.force_login(researcher)
    page = client.get(set_url).text
    assert 'aria-label="Close study flipped to annotators">Close</button>' in page
    closed = client.post(set_url, {"study": study.pk, "study-open": "0"}, follow=True)
    assert "Study flipped closed: annotators no longer see it." in closed.text
    assert "Closed <form" in closed.text and ">Reopen</button>" in closed.text
    client.force_login(annotator_user)
    assert "flipped" not in client.get(reverse("verbalizer:work-list")).text
    assert client.get(reverse("verbalizer:work-next", args=[study.pk])).status_code == 404
    assert HumanAnswer.objects.filter(study=study).count() == 1  # kept
    client.force_login(researcher)
    client.post(set_url, {"study": study.pk, "study-open": "1"})
    client.force_login(annotator_user)
    assert "flipped" in client.get(reverse("verbalizer:work-list")).text


def test_a_study_on_a_crowd_platform_is_not_closed_from_the_set_page(client, researcher, study):
    """Its workers holding HITs could no longer answer: refused, with the way back."""
    from annotate.crowd.services.publishing import PublishSettings
    from annotate.verbalizer.services import crowd

    crowd.study_publication_create(
        study=study, platform_name="selfhosted", base_url="https://x.example",
        chosen=PublishSettings(title="Pick a word", description="Keys 1 and 2"),
    )  # fmt: skip
    set_url = reverse("verbalizer:set-detail", args=[study.evaluation_set_id])
    client.force_login(researcher)
    assert ">Close</button>" not in client.get(set_url).text
    refused = client.post(set_url, {"study": study.pk, "study-open": "0"})
    assert refused.status_code == 409 and "published to a crowd platform" in refused.text
    study.refresh_from_db()
    assert study.active
    missing = client.post(set_url, {"study": "nope", "study-open": "0"})
    assert missing.status_code == 404


def test_a_prompt_answered_in_another_study_of_the_set_is_neither_offered_nor_taken(client, study):
    """Two studies of a set may share prompts; reports read one answer per person and prompt,
    so a prompt the annotator answered in one is not offered in the other, and an answer
    posted to it anyway is refused (409) and writes nothing: it would fill one of the prompt's
    places with an answer that counts nowhere."""
    from annotate.models import Annotator

    again = human_study_create(
        evaluation_set=study.evaluation_set, name="flipped again", mappings=["flipped-golden"],
        items_per_dataset=2, answers_per_prompt=2,
    )  # fmt: skip
    assert set(again.prompts.all()) == set(study.prompts.all())
    person = UserFactory(username="twice", roles=["annotator"])
    Annotator.objects.create(user=person, name=person.username, kind="expert")
    client.force_login(person)
    for _ in range(2):
        prompt = client.get(reverse("verbalizer:work-next", args=[study.pk])).context["prompt"]
        answered = client.post(
            reverse("verbalizer:work-answer", args=[study.pk]), {"prompt": prompt.pk, "key": "1"}
        )
        assert answered.status_code == 302
    page = client.get(reverse("verbalizer:work-next", args=[again.pk]))
    assert page.context["prompt"] is None and b"Nothing left" in page.content
    refused = client.post(
        reverse("verbalizer:work-answer", args=[again.pk]), {"prompt": prompt.pk, "key": "1"}
    )
    assert refused.status_code == 409
    assert "You answered this item in another study already" in refused.text
    assert "study &#x27;flipped&#x27;" not in refused.text  # a study's name is the researchers'
    assert not again.answers.exists()
