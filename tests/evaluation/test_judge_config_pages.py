"""The Judges page: the judge configurations, and a form to make one on an engine endpoint."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotate.models import Annotator, AnnotatorKind
from evaluation.models import JudgeConfig, JudgeProtocol
from evaluation.services.judge_configs import judge_config_create
from evaluation.services.judge_runs import judge_run_create
from tests.annotate.engine.conftest import make_endpoint
from tests.evaluation.judge_helpers import make_benchmark
from tests.factories import AnnotatorFactory

pytestmark = pytest.mark.django_db

PAID = "http://127.0.0.1:9/v1"  # an address: spends money; nothing is ever sent to it here


def judges_url() -> str:
    return reverse("judge:config-list")


def _form(endpoint, **extra) -> dict:
    return {
        "name": "my-judge",
        "protocol": JudgeProtocol.ALL_IN_ONE,
        "endpoint": endpoint.pk,
        **extra,
    }


def _written() -> tuple[int, int]:
    return JudgeConfig.objects.count(), Annotator.objects.count()


def test_the_list_shows_each_judge_with_its_endpoint_cost_and_runs(client, researcher):
    # Priced like the demo's judge, so reports show what it would cost: it still bills nobody.
    fake = make_endpoint("", name="offline", model="fake-1", price_prompt_per_1k="0.03")
    paid = make_endpoint(PAID, name="gpt", model="gpt-4-0314")
    used = judge_config_create(name="used-judge", endpoint=fake)
    judge_config_create(name="paid-judge", endpoint=paid, protocol=JudgeProtocol.OFFICIAL)
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    for _ in range(2):
        judge_run_create(config=used, benchmark=benchmark, systems=systems)
    client.force_login(researcher)

    page = client.get(judges_url())

    assert page.status_code == 200
    rows = {config.name: config for config in page.context["configs"]}
    assert list(rows) == ["paid-judge", "used-judge"]
    assert (rows["used-judge"].run_count, rows["paid-judge"].run_count) == (2, 0)
    used_row = _row(page.text, used)
    assert "used-judge" in used_row and "offline" in used_row and "fake-1" in used_row
    assert "<td>offline fake: no bill, researchers may use it</td>" in used_row
    assert "free" not in used_row and "2 runs" in used_row
    assert f'href="{reverse("judge:run-list")}?judge={used.pk}"' in used_row
    paid_row = _row(page.text, JudgeConfig.objects.get(name="paid-judge"))
    assert (
        "<td>paid API: admins only</td>" in paid_row
        and "gpt-4-0314" in paid_row
        and "0 runs" in paid_row
    )
    assert JudgeProtocol.OFFICIAL.label in paid_row
    # Endpoint pages are admins': a researcher sees the endpoint's name, not a dead link.
    assert reverse("engine:endpoint-edit", args=[fake.pk]) not in page.text
    assert reverse("engine:endpoint-new") not in page.text


def _row(text: str, config: JudgeConfig) -> str:
    start = text.index(f'<tr data-judge="{config.pk}">')
    return text[start : text.index("</tr>", start)]


def test_the_runs_link_lists_only_that_judges_runs(client, researcher):
    fake = make_endpoint("", name="offline")
    first = judge_config_create(name="first-judge", endpoint=fake)
    second = judge_config_create(name="second-judge", endpoint=fake)
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    mine = judge_run_create(config=first, benchmark=benchmark, systems=systems)
    other = judge_run_create(config=second, benchmark=benchmark, systems=systems)
    client.force_login(researcher)

    page = client.get(reverse("judge:run-list"), {"judge": first.pk})

    assert [run.pk for run in page.context["runs"]] == [mine.pk]
    assert "LLM judge runs of first-judge" in page.text
    assert reverse("judge:run-detail", args=[other.pk]) not in page.text
    everything = client.get(reverse("judge:run-list"))
    assert {run.pk for run in everything.context["runs"]} == {mine.pk, other.pk}
    for bad in ("999999", "nope", "", "1.0", "99999999999999999999999"):
        assert client.get(reverse("judge:run-list"), {"judge": bad}).status_code == 404, bad


def test_a_researcher_creates_a_judge_through_the_page(client, researcher):
    fake = make_endpoint("", name="offline")
    client.force_login(researcher)

    page = client.post(judges_url(), _form(fake))

    assert page.status_code == 302 and page["Location"] == judges_url()
    config = JudgeConfig.objects.get(name="my-judge")
    assert (config.endpoint, config.protocol) == (fake, JudgeProtocol.ALL_IN_ONE)
    annotator = config.annotator
    assert (annotator.name, annotator.kind, annotator.judge_config) == (
        "my-judge",
        AnnotatorKind.LLM,
        "my-judge",
    )
    shown = client.get(judges_url())
    assert "Created the judge my-judge on offline." in shown.text
    assert f'<tr data-judge="{config.pk}">' in shown.text
    # The run form offers it at once.
    assert config in client.get(reverse("judge:run-new")).context["form"].fields["config"].queryset


@pytest.mark.parametrize("taken_by", ["annotator", "judge"])
def test_a_name_taken_is_refused_beside_the_name_and_nothing_is_written(
    client, researcher, taken_by
):
    fake = make_endpoint("", name="offline")
    if taken_by == "annotator":
        AnnotatorFactory(name="my-judge", kind=AnnotatorKind.EXPERT)
    else:
        judge_config_create(name="my-judge", endpoint=fake)
    before = _written()
    client.force_login(researcher)

    page = client.post(judges_url(), _form(fake, name=" my-judge "))

    assert page.status_code == 400
    form = page.context["form"]
    assert form.errors["name"] == ["The name 'my-judge' is taken by an annotator or a judge."]
    assert not form.non_field_errors()
    assert _written() == before
    # The values typed are kept, and the message sits with the name field.
    assert 'name="name" value=" my-judge "' in page.text
    assert f'<option value="{fake.pk}" selected>' in page.text
    assert '<option value="all_in_one" selected>' in page.text
    name_error = page.text[page.text.index('id="id_name_error"') :]
    assert name_error.index("is taken by an annotator") < name_error.index("</ul>")


@pytest.mark.parametrize("taken_by", ["annotator", "judge"])
def test_a_name_differing_only_in_capitals_is_taken_too(client, admin_user, taken_by):
    # Two judges "demo-judge" and "DEMO-JUDGE" would be two llm annotators that read alike in
    # every report, as endpoints differing only in capitals would (refused there too).
    fake = make_endpoint("", name="offline")
    if taken_by == "annotator":
        AnnotatorFactory(name="my-judge", kind=AnnotatorKind.EXPERT)
    else:
        judge_config_create(name="my-judge", endpoint=fake)
    before = _written()
    client.force_login(admin_user)

    page = client.post(judges_url(), _form(fake, name="My-Judge"))

    assert page.status_code == 400
    assert page.context["form"].errors["name"] == [
        "The name 'My-Judge' is taken by an annotator or a judge ('my-judge'); names that "
        "differ only in capitals are the same name."
    ]
    assert _written() == before


def test_a_blank_name_is_refused_beside_the_name(client, researcher):
    fake = make_endpoint("", name="offline")
    client.force_login(researcher)
    before = _written()

    page = client.post(judges_url(), _form(fake, name="   "))

    assert page.status_code == 400
    assert page.context["form"].errors["name"]
    assert _written() == before


def test_only_an_admin_may_put_a_judge_on_a_paid_endpoint(client, researcher, admin_user):
    paid = make_endpoint(PAID, name="gpt")
    before = _written()
    client.force_login(researcher)

    refused = client.post(judges_url(), _form(paid))

    assert refused.status_code == 403
    errors = refused.context["form"].errors
    assert "only an admin may" in errors["endpoint"][0] and "name" not in errors
    assert _written() == before
    client.force_login(admin_user)
    created = client.post(judges_url(), _form(paid))
    assert created.status_code == 302
    assert JudgeConfig.objects.get(name="my-judge").endpoint == paid


def test_the_page_says_what_is_missing_and_links_admins_to_a_new_endpoint(
    client, researcher, admin_user
):
    client.force_login(admin_user)
    page = client.get(judges_url())
    (missing,) = page.context["prerequisites"]
    assert missing.url == reverse("engine:endpoint-new")
    assert missing.action == (
        "Create one (a blank address is the offline fake model: it bills nobody, so "
        "researchers may use it)."
    )
    assert f'href="{reverse("engine:endpoint-new")}"' in page.text
    assert 'id="create-judge" disabled' in page.text

    client.force_login(researcher)
    (missing,) = client.get(judges_url()).context["prerequisites"]
    assert (missing.problem, missing.url) == ("There is no engine endpoint yet.", "")

    make_endpoint(PAID, name="gpt")  # a researcher still has nothing to choose
    (missing,) = client.get(judges_url()).context["prerequisites"]
    assert missing.problem.startswith("Every endpoint calls a paid API")
    assert missing.action == (
        "Ask an admin to create the judge, or an offline fake endpoint "
        "(no address: it bills nobody, so researchers may use it)."
    )
    client.force_login(admin_user)
    assert client.get(judges_url()).context["prerequisites"] == []


def test_annotators_get_the_403_page_as_on_the_other_judge_pages(client, annotator_user):
    fake = make_endpoint("", name="offline")
    client.force_login(annotator_user)
    assert client.get(judges_url()).status_code == 403
    assert client.post(judges_url(), _form(fake)).status_code == 403
    assert not JudgeConfig.objects.exists()


def test_names_from_the_database_are_escaped(client, admin_user):
    endpoint = make_endpoint("", name="<i>endpoint</i>", model="<b>model</b>")
    judge_config_create(name="<script>alert(1)</script>", endpoint=endpoint)
    client.force_login(admin_user)
    page = client.get(judges_url()).text
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>model</b>" not in page and "<i>endpoint</i>" not in page


def test_the_judge_run_form_links_to_the_judges_page_when_there_is_no_judge(
    client, researcher, admin_user
):
    for user in (researcher, admin_user):
        client.force_login(user)
        page = client.get(reverse("judge:run-new"))
        missing = page.context["prerequisites"][0]
        assert missing.problem == "There is no judge configuration yet."
        assert missing.url == judges_url()
        section = page.text[page.text.index('id="prerequisites"') :]
        assert f'<a href="{judges_url()}">' in section[: section.index("</section>")]


def test_the_list_costs_a_fixed_number_of_queries(
    client, admin_user, django_assert_max_num_queries
):
    client.force_login(admin_user)
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))

    def grow(start: int) -> None:
        for n in range(start, start + 5):
            endpoint = make_endpoint(PAID if n % 2 else "", name=f"endpoint-{n}")
            config = judge_config_create(name=f"judge-{n}", endpoint=endpoint)
            judge_run_create(config=config, benchmark=benchmark, systems=systems)

    counts = []
    for start in (0, 5):
        grow(start)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(judges_url()).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    with django_assert_max_num_queries(9):
        client.get(judges_url())
