"""The database down in the middle of a request: a clean 503 that says to retry, no traceback."""

import re

import pytest
from django.db import OperationalError
from django.test import Client

pytestmark = pytest.mark.django_db


def _database_down(*args, **kwargs):
    raise OperationalError('connection to server at "127.0.0.1", port 5432 failed')


def test_a_page_answers_503_with_retry_after_when_the_database_is_down(
    client, annotator_user, monkeypatch
):
    client.force_login(annotator_user)
    client.raise_request_exception = False
    monkeypatch.setattr("config.sessions.SessionStore.load", _database_down)

    page = client.get("/annotate/")

    assert page.status_code == 503
    assert page["Retry-After"] == "30"
    assert "try again in a minute" in page.text
    assert "Traceback" not in page.text and "5432" not in page.text


def test_other_errors_keep_the_plain_500(client, annotator_user, monkeypatch):
    client.force_login(annotator_user)
    client.raise_request_exception = False

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("config.sessions.SessionStore.load", broken)
    page = client.get("/annotate/")
    assert page.status_code == 500
    assert "a bug" not in page.text


def test_a_submit_with_a_stale_form_token_says_what_to_do_in_the_site_layout(
    annotator_user,
):
    # The open task page was sent with a token a later login (in another tab) replaced.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(annotator_user)
    browser.cookies["csrftoken"] = "a" * 32

    page = browser.post("/annotate/assignments/1/", {"csrfmiddlewaretoken": "b" * 32})

    assert page.status_code == 403
    assert "This form was out of date" in page.text
    assert "Go back, reload the page and send it again" in page.text
    # In the site's layout, as its other pages: the annotator's navigation and name.
    assert 'href="/annotate/"' in page.text and "annotator-user" in page.text
    assert "CSRF_FAILURE_VIEW" not in page.text and "hijacked" not in page.text


def _stale_post(path, **headers):
    """A logged-out browser sends a form whose token a login or logout in another tab replaced."""
    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = "a" * 32
    return browser.post(path, {"csrfmiddlewaretoken": "b" * 32}, **headers)


@pytest.mark.parametrize(
    ("path", "referer", "back_to"),
    [
        # The task page posts to itself: back to the task after logging in.
        (
            "/annotate/assignments/7/",
            "http://testserver/annotate/assignments/7/?x=1",
            "/annotate/assignments/7/",
        ),
        # "Start next task" posts to start-next (a POST's address): back to the page it was on.
        ("/annotate/projects/3/next/", "http://testserver/annotate/", "/annotate/"),
        # No page named, or not one of this site's: the dashboard, never another host.
        ("/annotate/projects/3/next/", None, "/annotate/"),
        ("/annotate/assignments/7/", "https://evil.example/annotate/assignments/7/", "/annotate/"),
        ("/annotate/assignments/7/", "http://testserver//evil.example/x", "/annotate/"),
        ("/annotate/assignments/7/", "http://testserver/no/such/page/", "/annotate/"),
        ("/accounts/login/", "http://testserver/accounts/login/?next=/x/", "/annotate/"),
    ],
)
def test_the_stale_form_pages_log_in_link_returns_to_the_page_the_form_was_on(
    db, path, referer, back_to
):
    """The link had no `next`: after logging in the annotator landed on the start page, not on
    the task they were doing."""
    headers = {"HTTP_REFERER": referer} if referer else {}
    page = _stale_post(path, **headers)
    assert page.status_code == 403 and "This form was out of date" in page.text
    link = re.search(r'<a href="([^"]*)" id="login-and-return">Log in</a>', page.text)
    assert link and link.group(1) == f"/accounts/login/?next={back_to}"
