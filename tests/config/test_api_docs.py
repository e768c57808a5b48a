"""The ReDoc page's script: the sidecar's bundle with its CDN logo pointed at our own file."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_redoc_page_takes_its_script_from_the_app(client):
    page = client.get(reverse("api-redoc")).content.decode()
    assert f'<script src="{reverse("api-redoc-bundle")}"></script>' in page


def test_the_redoc_script_loads_its_logo_from_the_app_and_answers_304_when_unchanged(client):
    response = client.get(reverse("api-redoc-bundle"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    bundle = response.content.decode()
    assert "cdn.redoc.ly" not in bundle
    assert '"/static/annotate/redoc-logo.svg"' in bundle
    again = client.get(reverse("api-redoc-bundle"), HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304 and again.content == b""
