import pytest

from tests.annotate.crowd.fake_mturk import FakeMTurkServer


@pytest.fixture
def aws_env(monkeypatch):
    """Dummy credentials: the fake server only checks that requests are signed."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


@pytest.fixture
def fake_mturk(aws_env):
    with FakeMTurkServer() as server:
        yield server
