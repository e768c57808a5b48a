"""One Content-Security-Policy (django-csp's middleware) on every response, not only on the pages
that used to set their own: HTML pages, the API, errors, redirects."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

SITE_POLICY = (
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
)


def test_every_kind_of_response_carries_the_site_policy(client, researcher):
    anonymous = [reverse("login"), reverse("health"), "/admin/login/", "/no-such-page/"]
    answers = [client.get(url) for url in anonymous]
    client.force_login(researcher)
    answers += [
        client.get(reverse("home")),
        client.get(reverse("annotate:benchmark-list")),
        client.get(reverse("api-schema")),
        client.get(reverse("api-docs")),
        client.post(reverse("annotate-api:project-create"), "{", content_type="application/json"),
    ]
    for answer in answers:
        policy = answer["Content-Security-Policy"]
        assert all(part in policy for part in SITE_POLICY), (answer.request["PATH_INFO"], policy)
        assert "unsafe-inline" not in policy


def test_the_api_docs_load_nothing_from_elsewhere(client, researcher):
    client.force_login(researcher)
    page = client.get(reverse("api-docs"))
    assert page.status_code == 200
    assert "cdn" not in page.text.lower() and "<style>" not in page.text
    assert "<script>" not in page.text  # its set-up script is a file of its own (?script)
