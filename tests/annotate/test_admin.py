"""Django admin: every model of the data model is there, with search and filters that work."""

import pytest
from django.apps import apps
from django.contrib import admin

from annotate.models import LabelValue
from tests.factories import LabelFactory

pytestmark = pytest.mark.django_db

OUR_APPS = ("annotate", "crowd", "evaluation")


def test_every_model_of_the_data_model_has_search_and_filters():
    for model in apps.get_app_config("annotate").get_models():
        model_admin = admin.site._registry.get(model)
        assert model_admin is not None, f"{model.__name__} is not in the admin"
        assert model_admin.search_fields, f"{model.__name__} admin has no search"
        assert model_admin.list_filter, f"{model.__name__} admin has no filters"
    for label in ("crowd", "evaluation"):
        for model in apps.get_app_config(label).get_models():
            assert model in admin.site._registry, f"{model.__name__} is not in the admin"


def test_every_admin_list_searches_and_filters(client, admin_user):
    label = LabelFactory(value=LabelValue.UNKNOWN)
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    # A copy: the first page loads config.urls, which takes knox's tokens out of the registry.
    for model, model_admin in list(admin.site._registry.items()):
        if model._meta.app_label not in OUR_APPS:
            continue
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        page = client.get(url, {"q": "x"} if model_admin.search_fields else {})
        assert page.status_code == 200, url

    labels = client.get("/admin/annotate/label/", {"value__exact": LabelValue.UNKNOWN}).text
    assert "UNKNOWN" in labels and "1 label" in labels
    assert label.annotator.name in labels


@pytest.mark.parametrize("model_name", ["label", "directscore"])
def test_an_admin_cannot_make_rejected_work_count_by_editing_it(client, admin_user, model_name):
    """Whether a label or direct score counts rests on its assignment and `imported`: a label
    taken off its rejected assignment and marked imported counted in every result. The change
    page saves what else was edited and leaves those two as they were."""
    from annotate.models import AnnotatorKind, AssignmentStatus, DirectScore, Label
    from annotate.selectors.results import counted_work
    from tests.factories import AnnotatorFactory, AssignmentFactory, DirectScoreFactory

    worker = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="mturk", worker_id="AW1")
    rejected = AssignmentFactory(annotator=worker, status=AssignmentStatus.REJECTED)
    if model_name == "label":
        work = LabelFactory(annotator=worker, assignment=rejected, value=LabelValue.YES)
        form = {
            "question": work.question_id,
            "response": work.response_id,
            "value": LabelValue.NO,
        }
        edited, model = ("value", LabelValue.NO), Label
    else:
        work = DirectScoreFactory(annotator=worker, assignment=rejected, score=3)
        form = {"response": work.response_id, "score": 5}
        edited, model = ("score", 5), DirectScore
    admin_user.is_superuser = True  # the `admin` role's users are staff without permissions
    admin_user.save()
    client.force_login(admin_user)

    url = f"/admin/annotate/{model_name}/{work.pk}/change/"
    forged = {**form, "annotator": worker.pk, "assignment": "", "imported": "on"}
    assert client.post(url, forged).status_code == 302

    work.refresh_from_db()
    assert getattr(work, edited[0]) == edited[1]  # the rest of the form was saved
    assert (work.assignment_id, work.imported) == (rejected.pk, False)
    assert not counted_work(model.objects.filter(pk=work.pk)).exists()
    page = client.get(url).text
    assert 'name="assignment"' not in page and 'name="imported"' not in page


@pytest.mark.parametrize("model_name", ["label", "directscore"])
def test_an_admin_cannot_make_a_platform_workers_unassigned_work_count_by_giving_it_to_someone(
    client, admin_user, model_name
):
    """A platform worker's label or score without an assignment (and not imported) counts
    nowhere; given to an in-house annotator on the change page it counted in every result. The
    annotator of existing work is read-only, the rest of the form still saved."""
    from annotate.models import AnnotatorKind, DirectScore, Label
    from annotate.selectors.results import counted_work
    from tests.factories import AnnotatorFactory, DirectScoreFactory

    worker = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="mturk", worker_id="AW2")
    expert = AnnotatorFactory(kind=AnnotatorKind.EXPERT)
    if model_name == "label":
        work = LabelFactory(annotator=worker, assignment=None, value=LabelValue.YES)
        form = {"question": work.question_id, "response": work.response_id, "value": LabelValue.NO}
        edited, model = ("value", LabelValue.NO), Label
    else:
        work = DirectScoreFactory(annotator=worker, assignment=None, score=3)
        form = {"response": work.response_id, "score": 5}
        edited, model = ("score", 5), DirectScore
    assert not counted_work(model.objects.filter(pk=work.pk)).exists()
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)

    url = f"/admin/annotate/{model_name}/{work.pk}/change/"
    assert client.post(url, {**form, "annotator": expert.pk}).status_code == 302

    work.refresh_from_db()
    assert getattr(work, edited[0]) == edited[1]
    assert work.annotator_id == worker.pk
    assert not counted_work(model.objects.filter(pk=work.pk)).exists()
    assert 'name="annotator"' not in client.get(url).text


@pytest.mark.django_db
def test_the_admin_says_why_an_existing_rows_fields_are_read_only(client, admin_user):
    """An annotator's kind, an assignment and a participant's answer open in the admin, greyed
    or shown only: each page now says why and where they are changed, not left to look broken."""
    from tests.annotate.verbalizer.test_study_page import answer, make_study, person
    from tests.factories import AssignmentFactory

    assignment = AssignmentFactory()
    study = make_study(1)
    given = answer(study, study.prompts.first(), person("p", "crowd", platform="mturk"))
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    pages = {
        f"/admin/annotate/annotator/{assignment.annotator_id}/change/": "set on the site's "
        "Annotators page",
        f"/admin/annotate/assignment/{assignment.pk}/change/": "Approve or reject it on its "
        "publication's review page",
        f"/admin/verbalizer/humananswer/{given.pk}/change/": "Reject it on its publication's "
        "review page",
    }
    for url, why in pages.items():
        page = client.get(url)
        assert page.status_code == 200, url
        assert why in page.content.decode(), url
    # A new annotator's page has every field to fill in and nothing to explain.
    assert "cannot be changed here" not in client.get("/admin/annotate/annotator/add/").text


@pytest.mark.django_db
def test_an_answers_delete_address_says_why_it_is_kept(client, admin_user):
    """A participant's answer is never deleted: its delete address answered Django's bare 403,
    the site's "This page is not for your role", which told a superuser to ask for a role. It
    says why instead, in the admin's layout, and deletes nothing."""
    from django.utils.html import escape

    from annotate.verbalizer.models import HumanAnswer
    from tests.annotate.verbalizer.test_study_page import answer, make_study, person

    study = make_study(1)
    given = answer(study, study.prompts.first(), person("p", "crowd", platform="mturk"))
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    url = f"/admin/verbalizer/humananswer/{given.pk}/delete/"
    for refused in (client.get(url), client.post(url, {"post": "yes"})):
        assert refused.status_code == 403
        text = refused.content.decode()
        assert "<h1>This human answer cannot be deleted</h1>" in text
        assert escape("Answers are kept as the study's record") in text
        assert "not for your role" not in text
        assert f'href="/admin/verbalizer/humananswer/{given.pk}/change/"' in text
    assert HumanAnswer.objects.filter(pk=given.pk).exists()


def test_when_an_annotators_kind_changed_is_not_edited_in_the_admin(client, admin_user):
    """The reports' caches key on the stamp of a kind change (kind_changed_at): edited by hand
    it made a cached report miss a change, or look changed when nothing was."""
    from tests.factories import AssignmentFactory

    annotator = AssignmentFactory().annotator
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    page = client.get(f"/admin/annotate/annotator/{annotator.pk}/change/").text
    assert 'name="kind_changed_at' not in page and 'name="kind"' not in page
