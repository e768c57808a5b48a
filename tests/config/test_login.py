import pytest
from django.core.cache import cache
from django.test import override_settings
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@override_settings(LOGIN_FAILURE_LIMIT=3)
def test_login_is_refused_after_repeated_failures_even_with_the_right_password(client, researcher):
    for _ in range(3):
        page = client.post(reverse("login"), {"username": researcher.username, "password": "wrong"})
        assert page.status_code == 200
    page = client.post(reverse("login"), {"username": researcher.username, "password": "pw"})
    assert page.status_code == 429
    assert "Too many failed attempts" in page.text
    assert "_auth_user_id" not in client.session


def test_login_works_with_the_right_password(client, researcher):
    page = client.post(reverse("login"), {"username": researcher.username, "password": "pw"})
    assert page.status_code == 302
    assert client.session["_auth_user_id"] == str(researcher.pk)


def test_admin_login_goes_through_the_limited_login_page(client):
    page = client.get("/admin/login/?next=/admin/")
    assert page.status_code == 302 and page["Location"].startswith(reverse("login"))
