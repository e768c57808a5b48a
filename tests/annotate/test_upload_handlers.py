"""What a request's file parts may make the server store (annotate/upload_handlers.py): nothing
for a request without a logged-in user, and no more than IMPORT_MAX_UPLOAD_BYTES of a file for
one with, wherever it is posted. Django parses a POST's body (storing its files) before any
view runs: CsrfViewMiddleware reads it."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import MemoryFileUploadHandler, TemporaryFileUploadHandler
from django.test import Client
from django.urls import reverse
from knox.models import AuthToken

from annotate.models import Benchmark, ImportJob
from tests.annotate.test_imports import ROW

pytestmark = pytest.mark.django_db

BIG = 3 * 1024 * 1024  # over FILE_UPLOAD_MAX_MEMORY_SIZE: written to a temporary file


@pytest.fixture
def stored(monkeypatch) -> list[int]:
    """The byte counts Django's storing handlers (memory, temporary file) were handed."""
    received: list[int] = []
    for handler in (MemoryFileUploadHandler, TemporaryFileUploadHandler):
        original = handler.receive_data_chunk

        def spy(self, raw_data, start, original=original):
            received.append(len(raw_data))
            return original(self, raw_data, start)

        monkeypatch.setattr(handler, "receive_data_chunk", spy)
    return received


def big_file(size: int = BIG, name: str = "big.bin") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, b"x" * size, content_type="application/octet-stream")


def test_a_stranger_cannot_make_the_server_store_a_file(stored):
    browser = Client(enforce_csrf_checks=True)
    browser.get(reverse("login"))  # a CSRF cookie, which the middleware's check reads the body for
    login = browser.post(reverse("login"), {"username": "a", "password": "b", "f": big_file()})
    # A crowd worker's page takes no login (and no CSRF token): a made-up link.
    worker = browser.post("/crowd/join/no-such-link/", {"f": big_file()})
    assert (login.status_code, worker.status_code) == (403, 404)
    assert sum(stored) == 0


def test_an_upload_over_the_limit_is_stored_only_up_to_it_and_refused_naming_it(
    client, researcher, settings, tmp_path, stored
):
    settings.MEDIA_ROOT = tmp_path
    settings.IMPORT_MAX_UPLOAD_BYTES = 1000
    client.force_login(researcher)
    form = {"kind": "instructions", "benchmark_name": "b", "upload": big_file(name="b.jsonl")}
    page = client.post(reverse("annotate:import-list"), form)
    assert page.status_code == 400
    assert "larger than the upload limit (1,000 bytes)" in page.text
    assert sum(stored) <= 1000
    assert not ImportJob.objects.exists() and not Benchmark.objects.exists()


def test_an_api_upload_with_a_token_is_stored_and_imported(researcher, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    _, key = AuthToken.objects.create(user=researcher)
    row = json.dumps(ROW).encode() + b"\n"
    upload = SimpleUploadedFile("b.jsonl", row, content_type="application/jsonl")
    answer = Client().post(
        reverse("annotate-api:imports"),
        {"kind": "instructions", "benchmark_name": "b", "upload": upload},
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    assert answer.status_code == 200, answer.content
    assert Benchmark.objects.get(name="b").instructions.count() == 1
