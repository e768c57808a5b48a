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
