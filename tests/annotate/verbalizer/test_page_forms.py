"""The forms of the verbalizer pages: a refused form comes back on its own page with the error
beside the field (or above the form) and everything typed kept; nothing is written."""

import re
from collections import Counter

import pytest
from django.urls import reverse

from annotate.models import Annotator
from annotate.roles import ANNOTATOR
from annotate.verbalizer.models import ClassificationDataset, HumanStudy, Mapping
from annotate.verbalizer.services.humans import human_answer_submit, human_study_create
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ERROR_PAGE = "Back to the start page"  # the generic "Cannot do that" page


def field_row(html: str, field_id: str) -> str:
    """The form row (label, field, help text, errors) holding the field with this id."""
    rows = re.findall(r'<div class="form-row.*?(?=<div class="form-row|</form>)', html, re.S)
    (row,) = [row for row in rows if f'id="{field_id}"' in row]
    return row


@pytest.fixture
def direct_set(db):
    fill("SST-2", [True, False, True])
    return evaluation_set_create(
        name="direct only", datasets=["SST-2"], items=3, seed=1, mappings="all",
        modes=["direct"],
    ).evaluation_set  # fmt: skip


def test_a_study_name_taken_is_shown_beside_the_name_with_the_slice_kept(
    client, researcher, direct_set
):
    human_study_create(evaluation_set=direct_set, name="flipped", answers_per_prompt=2)
    client.force_login(researcher)
    url = reverse("verbalizer:set-detail", args=[direct_set.pk])
    refused = client.post(
        url,
        {"study-name": "flipped", "study-mappings": ["0|1"], "study-modes": ["direct"],
         "study-items_per_dataset": "2", "study-answers_per_prompt": "4",
         "study-completion_code": "KEEP-ME"},
    )  # fmt: skip
    html = refused.content.decode()
    assert refused.status_code == 400 and ERROR_PAGE not in html
    assert "The study was not published" in html  # said at the top; the form is far below
    name_row = field_row(html, "id_study-name")
    assert "a study named &#x27;flipped&#x27; exists already" in name_row
    assert 'value="flipped"' in name_row
    assert 'value="KEEP-ME"' in field_row(html, "id_study-completion_code")
    assert 'value="4"' in field_row(html, "id_study-answers_per_prompt")
    chosen = re.search(r'<input[^>]*value="0\|1"[^>]*>', field_row(html, "id_study-mappings_0"))
    assert "checked" in chosen.group(0)
    assert HumanStudy.objects.count() == 1


def test_the_publish_form_offers_only_the_sets_modes_and_refuses_another_on_the_form(
    client, researcher, direct_set
):
    client.force_login(researcher)
    url = reverse("verbalizer:set-detail", args=[direct_set.pk])
    html = client.get(url).content.decode()
    modes_row = field_row(html, "id_study-modes_0")
    assert 'value="direct"' in modes_row and 'value="cot"' not in modes_row
    datasets_row = field_row(html, "id_study-datasets_0")
    assert 'value="SST-2"' in datasets_row and 'value="RTE"' not in datasets_row
    # A stale form (or a hand-made POST) asking for chain of thought: refused beside Modes.
    refused = client.post(
        url, {"study-name": "cot please", "study-modes": ["cot"], "study-answers_per_prompt": "3"}
    )
    html = refused.content.decode()
    assert refused.status_code == 400 and ERROR_PAGE not in html
    assert "cot is not one of the available choices" in field_row(html, "id_study-modes_0")
    assert 'value="cot please"' in field_row(html, "id_study-name")
    assert not HumanStudy.objects.exists()


def test_a_dataset_name_taken_is_shown_beside_the_name_with_the_values_kept(client, researcher):
    client.force_login(researcher)
    before = ClassificationDataset.objects.count()
    refused = client.post(
        reverse("verbalizer:overview"),
        {"d-name": "SST-2", "d-family": "sentiment", "d-positive_name": "good",
         "d-negative_name": "bad", "d-description": "my own reviews"},
    )  # fmt: skip
    html = refused.content.decode()
    assert refused.status_code == 400 and ERROR_PAGE not in html
    assert "The dataset was not added" in html
    name_row = field_row(html, "id_d-name")
    assert "a dataset named &#x27;SST-2&#x27; exists already" in name_row
    assert 'value="SST-2"' in name_row
    assert 'value="good"' in field_row(html, "id_d-positive_name")
    assert "my own reviews</textarea>" in field_row(html, "id_d-description")
    assert ClassificationDataset.objects.count() == before


def test_a_mapping_with_one_word_twice_is_refused_on_the_form_with_the_words_kept(
    client, researcher
):
    client.force_login(researcher)
    before = Mapping.objects.count()
    refused = client.post(
        reverse("verbalizer:overview"),
        {"m-group": "natural", "m-positive_word": "yes", "m-negative_word": "yes"},
    )
    html = refused.content.decode()
    assert refused.status_code == 400 and ERROR_PAGE not in html
    assert "The mapping was not added" in html
    form = html[html.index('aria-labelledby="add-mapping"') :]
    form = form[: form.index("</form>")]
    assert "two different, non-empty words are needed" in form
    assert 'value="yes"' in field_row(form + "</form>", "id_m-positive_word")
    assert 'value="yes"' in field_row(form + "</form>", "id_m-negative_word")
    assert Mapping.objects.count() == before


def test_every_label_of_the_set_page_names_one_field(client, researcher, direct_set):
    """The run form and the publish form both have Modes: each its own ids."""
    client.force_login(researcher)
    html = client.get(reverse("verbalizer:set-detail", args=[direct_set.pk])).content.decode()
    ids = Counter(re.findall(r'\sid="([^"]+)"', html))
    assert [i for i, n in ids.items() if n > 1] == []
    targets = re.findall(r'<label[^>]*\sfor="([^"]+)"', html)
    assert targets and all(ids[t] == 1 for t in targets)
    assert {"id_run-modes_0", "id_study-modes_0"} <= set(targets)


def test_the_set_pages_show_the_items_a_set_holds_beside_those_asked(client, researcher):
    fill("SST-2", [True, False] * 6)  # 12 items
    fill("RTE", [True, False] * 3, text_b="h")  # 6 items
    short = evaluation_set_create(
        name="short", datasets=["SST-2"], items=100, seed=1, mappings="natural"
    ).evaluation_set
    mixed = evaluation_set_create(
        name="mixed", datasets=["SST-2", "RTE"], items=10, seed=1, mappings="natural"
    ).evaluation_set
    exact = evaluation_set_create(
        name="exact", datasets=["SST-2"], items=5, seed=1, mappings="natural"
    ).evaluation_set
    client.force_login(researcher)

    def header(evaluation_set):
        html = client.get(reverse("verbalizer:set-detail", args=[evaluation_set.pk])).text
        return re.search(r"<p>(\d+ prompts · .*?) · seed", html).group(1)

    assert header(short) == "36 prompts · 12 items per dataset (100 asked)"  # 12 x 3 mappings
    assert header(mixed) == "48 prompts · items per dataset: RTE 6, SST-2 10 (10 asked)"
    assert header(exact) == "15 prompts · 5 items per dataset"
    overview = client.get(reverse("verbalizer:overview")).text
    assert ">short</a></td><td>36</td><td>12 (100 asked)</td>" in overview
    assert ">exact</a></td><td>15</td><td>5</td>" in overview


def test_the_task_list_says_when_a_study_has_nothing_left_for_the_annotator(client):
    """Every prompt has its answers from others: no link that leads to "Nothing left"."""
    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="full", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=1)
    first, late = (UserFactory(username=n, roles=[ANNOTATOR]) for n in ("first", "late"))
    for user in (first, late):
        Annotator.objects.create(user=user, name=user.username, kind="expert")
    work = reverse("verbalizer:work-next", args=[study.pk])
    client.force_login(late)
    assert f'href="{work}">flip</a> — you answered 0 of 2' in client.get("/verbalizer/work/").text
    for prompt in study.prompts.all():
        human_answer_submit(
            study=study, prompt_id=prompt.pk, annotator=first.annotator, key=1, seconds=1.0
        )
    late_page = client.get(reverse("verbalizer:work-list")).text
    assert f'href="{work}"' not in late_page
    assert "flip — you answered 0 of 2; nothing left for you: the prompts you have not " in (
        late_page
    )
    client.force_login(first)
    first_page = client.get(reverse("verbalizer:work-list")).text
    assert f'href="{work}"' not in first_page
    assert "you answered 2 of 2; nothing left for you: you answered every prompt." in first_page


def test_label_words_the_parser_cannot_tell_apart_are_refused_everywhere(
    client, researcher, tmp_path
):
    """ "Foo" and "foo" (or "yes" and "Yes.") were taken as two words, but the reply parser
    lower-cases and strips them: the strict rule read every "foo" as the first word, the
    lenient rule as the second, so no accuracy meant anything."""
    from annotate.errors import ImportFileError
    from annotate.verbalizer.services.imports import classification_import

    client.force_login(researcher)
    before = (Mapping.objects.count(), ClassificationDataset.objects.count())
    refused = client.post(
        reverse("verbalizer:overview"),
        {"m-group": "neutral", "m-positive_word": "Foo", "m-negative_word": "foo"},
    )
    assert refused.status_code == 400
    assert "&#x27;Foo&#x27; and &#x27;foo&#x27; are the same word to the reply parser" in (
        refused.content.decode()
    )
    refused = client.post(
        reverse("verbalizer:overview"),
        {"d-name": "Mine", "d-family": "sentiment", "d-positive_name": "Good",
         "d-negative_name": "good."},
    )  # fmt: skip
    assert refused.status_code == 400 and b"same word to the reply parser" in refused.content
    path = tmp_path / "a.csv"
    path.write_text("text,label\nok,Yes\n", encoding="utf-8")
    with pytest.raises(ImportFileError, match="'Yes' and 'yes_' are the same word"):
        classification_import(
            path=str(path), dataset="new", fmt="csv", labels=("Yes", "yes_"), family="sentiment"
        )
    assert (Mapping.objects.count(), ClassificationDataset.objects.count()) == before
