"""judge_config_create and the reads of judge configurations."""

import pytest

from annotate.engine.errors import EngineNotFoundError, EnginePermissionError
from annotate.engine.models import Endpoint
from annotate.models import Annotator, AnnotatorKind
from evaluation.errors import JudgeConfigError, JudgeNotFoundError, JudgeRunChoiceNotFoundError
from evaluation.models import JudgeConfig
from evaluation.selectors.judge_configs import (
    judge_config_and_benchmark_by_name,
    judge_config_get,
)
from evaluation.services.judge_configs import judge_config_create
from tests.annotate.engine.conftest import make_endpoint
from tests.factories import AnnotatorFactory, BenchmarkFactory

pytestmark = pytest.mark.django_db

PAID = "http://127.0.0.1:9/v1"  # an address: spends money; nothing is sent to it here


def _written() -> tuple[int, int, int]:
    return JudgeConfig.objects.count(), Annotator.objects.count(), Endpoint.objects.count()


def test_only_an_admin_may_put_a_judge_on_a_paid_endpoint(researcher, admin_user):
    paid = make_endpoint(PAID, name="gpt")
    before = _written()

    with pytest.raises(EnginePermissionError, match="only an admin may") as refused:
        judge_config_create(name="judge", endpoint=paid, user=researcher)

    assert refused.value.field == "endpoint" and _written() == before
    assert judge_config_create(name="judge", endpoint=paid, user=admin_user).endpoint == paid
    assert judge_config_create(name="console", endpoint=paid).endpoint == paid  # user None


def test_a_researcher_may_put_a_judge_on_the_free_fake(researcher):
    fake = make_endpoint("", name="offline")
    config = judge_config_create(name="judge", endpoint=fake, user=researcher)
    assert (config.annotator.name, config.annotator.kind) == ("judge", AnnotatorKind.LLM)


def test_an_endpoint_made_for_a_refused_judge_is_rolled_back(researcher):
    before = _written()
    with pytest.raises(EnginePermissionError):
        judge_config_create(name="judge", backend="openai", base_url=PAID, user=researcher)
    assert _written() == before


def test_who_may_not_see_judges_is_told_there_is_no_such_thing(annotator_user):
    with pytest.raises(EngineNotFoundError):
        judge_config_create(
            name="judge", endpoint=make_endpoint("", name="offline"), user=annotator_user
        )
    assert not JudgeConfig.objects.exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [("  ", "needs a name"), ("expert-1", "is taken"), ("judge-1", "is taken")],
)
def test_a_blank_or_taken_name_is_refused_naming_the_field(name, message):
    fake = make_endpoint("", name="offline")
    AnnotatorFactory(name="expert-1", kind=AnnotatorKind.EXPERT)
    judge_config_create(name="judge-1", endpoint=fake)
    before = _written()
    with pytest.raises(JudgeConfigError, match=message) as refused:
        judge_config_create(name=name, endpoint=fake)
    assert refused.value.field == "name" and _written() == before


def test_judge_config_get_answers_not_found_for_anything_but_an_id():
    config = judge_config_create(name="judge", endpoint=make_endpoint("", name="offline"))
    assert judge_config_get(config_id=str(config.pk)) == config
    for bad in (config.pk + 1, "x", "", "1.5"):
        with pytest.raises(JudgeNotFoundError):
            judge_config_get(config_id=bad)


def test_a_runs_judge_and_benchmark_by_name_name_the_first_missing_field():
    config = judge_config_create(name="judge", endpoint=make_endpoint("", name="offline"))
    benchmark = BenchmarkFactory(name="bench")
    assert judge_config_and_benchmark_by_name(judge="judge", benchmark="bench") == (
        config,
        benchmark,
    )
    for judge, field, message in (
        ("nobody", "judge", "Field 'judge': no judge named 'nobody'."),
        ("judge", "benchmark", "Field 'benchmark': no benchmark named 'nothing'."),
    ):
        with pytest.raises(JudgeRunChoiceNotFoundError) as missing:
            judge_config_and_benchmark_by_name(judge=judge, benchmark="nothing")
        assert (missing.value.field, str(missing.value)) == (field, message)


def test_a_name_taken_between_the_check_and_the_insert_is_refused_not_a_server_error(
    monkeypatch,
):
    """Two people creating the same judge at once: the second insert of its annotator breaks
    the unique name; it is refused like any taken name (it was a 500)."""
    from evaluation.services import judge_configs

    fake = make_endpoint("", name="offline")
    AnnotatorFactory(name="twice")  # what the other request made in the meantime
    monkeypatch.setattr(judge_configs, "judge_config_name_check", lambda *, name: name)
    before = _written()
    with pytest.raises(JudgeConfigError, match="'twice' is taken") as refused:
        judge_config_create(name="twice", endpoint=fake)
    assert refused.value.field == "name" and _written() == before


def test_django_admin_refuses_a_name_taken_by_an_annotator_in_its_form(client, admin_user):
    """The admin's add form went to judge_config_create unchecked: a 500 for a taken name."""
    from django.urls import reverse

    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    fake = make_endpoint("", name="offline")
    AnnotatorFactory(name="ana")
    client.force_login(admin_user)
    url = reverse("admin:evaluation_judgeconfig_add")
    page = client.post(url, {"name": "ana", "endpoint": fake.pk, "protocol": "multi_turn"})
    assert page.status_code == 200 and "is taken by an annotator or a judge" in page.text
    assert not JudgeConfig.objects.exists()
    made = client.post(url, {"name": "judge-1", "endpoint": fake.pk, "protocol": "multi_turn"})
    assert made.status_code == 302
    assert JudgeConfig.objects.get().annotator.name == "judge-1"


def _admin_client(client, admin_user):
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    return client


def test_django_admin_refuses_a_name_taken_after_its_form_checked_it_not_a_server_error(
    client, admin_user, monkeypatch
):
    """Free when the form checks it, taken when the judge is made (another request won): the
    add page says so and keeps nothing (judge_config_create's refusal was a 500)."""
    from django.urls import reverse

    import evaluation.admin
    from evaluation.services.judge_configs import judge_config_name_check

    def checked_then_taken(*, name: str) -> str:
        checked = judge_config_name_check(name=name)
        AnnotatorFactory(name=name)  # the other request, between the check and the create
        return checked

    monkeypatch.setattr(evaluation.admin, "judge_config_name_check", checked_then_taken)
    fake = make_endpoint("", name="offline")
    url = reverse("admin:evaluation_judgeconfig_add")
    before = _written()

    page = _admin_client(client, admin_user).post(
        url, {"name": "race", "endpoint": fake.pk, "protocol": "multi_turn"}, follow=True
    )

    assert page.status_code == 200 and page.redirect_chain == [(url, 302)]
    assert "The name &#x27;race&#x27; is taken by an annotator or a judge." in page.text
    assert _written() == before


def test_django_admin_shows_an_existing_judges_name_read_only(client, admin_user):
    """Renaming a judge left its annotator (its labels) under the old name, and could take a
    human annotator's name: the change form no longer offers the name."""
    from django.urls import reverse

    fake = make_endpoint("", name="offline")
    config = judge_config_create(name="judge-1", endpoint=fake)
    AnnotatorFactory(name="ana")
    url = reverse("admin:evaluation_judgeconfig_change", args=[config.pk])
    admin = _admin_client(client, admin_user)

    assert 'name="name"' not in admin.get(url).text
    saved = admin.post(url, {"name": "ana", "endpoint": fake.pk, "protocol": "all_in_one"})

    assert saved.status_code == 302
    config.refresh_from_db()
    assert (config.name, config.annotator.name, config.protocol) == (
        "judge-1",
        "judge-1",
        "all_in_one",
    )
