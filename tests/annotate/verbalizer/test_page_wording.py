"""What the verbalizer pages say, as a new user read them: the help page's title, a model's size
as it was typed, a run page that does not say its heading twice, the review page's item ids,
and the agreement table's raw_agreement defined where the exports are described."""

import pytest
from django.urls import reverse

from annotate.verbalizer.models import ClassificationItem
from annotate.verbalizer.services.runs import verbalizer_run_create
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.engine.conftest import make_endpoint
from tests.annotate.verbalizer.helpers import fill

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_items(db):
    fill("SST-2", [True, False])
    return evaluation_set_create(
        name="s", datasets=["SST-2"], items=2, seed=1, mappings="golden"
    ).evaluation_set


def test_the_help_page_is_titled_without_the_issue_number(client, researcher):
    client.force_login(researcher)
    page = " ".join(client.get(reverse("help-page", args=["verbalizer"])).text.split())
    assert "Verbalizer manipulation" in page and "issue 15" not in page
    assert "`raw_agreement` (the share of the prompts" not in page  # rendered, not raw
    assert "raw_agreement</code> (the share of the prompts on which every rater chose" in page


def test_a_models_size_shows_as_typed_and_the_run_page_says_its_heading_once(
    client, researcher, two_items
):
    make_endpoint("", name="offline")
    small = verbalizer_run_create(
        evaluation_set=two_items, system="m", endpoint="offline", model_size_b=1
    )
    verbalizer_run_create(
        evaluation_set=two_items, system="big", endpoint="offline", model_size_b=1.5
    )
    client.force_login(researcher)

    page = client.get(reverse("verbalizer:set-detail", args=[two_items.pk])).text
    assert "<td>1B</td>" in page and "<td>1.5B</td>" in page and "1.0" not in page

    run_page = client.get(reverse("engine:run-detail", args=[small.engine_run_id])).text
    assert "<h1>System m on set s</h1>" in run_page
    assert "Verbalizer: system m on set s" not in run_page


def test_the_review_page_names_the_item_by_its_id_too(client, admin_user, two_items):
    """As the prompts page does: "SST-2 #1 (r01)", not "SST-2 #1" alone."""
    from annotate.verbalizer.services.humans import human_study_create
    from tests.annotate.verbalizer.test_crowd_spending import _answer_on_fake, _publish

    ClassificationItem.objects.filter(position=1).update(external_id="r01")
    ClassificationItem.objects.filter(position=2).update(external_id="r02")
    study = human_study_create(evaluation_set=two_items, name="h", modes=["direct"])
    publication = _publish(study, "fake", "0.20")
    answer = _answer_on_fake(publication.hits.order_by("id").first(), "W1")
    client.force_login(admin_user)

    page = client.get(reverse("verbalizer:crowd-review", args=[publication.pk])).text

    item = answer.prompt.item
    assert f"SST-2 #{item.position} ({item.external_id}) · golden" in page
