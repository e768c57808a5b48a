import pytest

from tests.annotate.crowd.conftest import (  # noqa: F401  the fake MTurk server for crowd tests
    aws_env,
    fake_mturk,
    fresh_fake_platform,
    mturk_settings,
)
from tests.evaluation.openai_stub import StubOpenAI


@pytest.fixture
def stub():
    with StubOpenAI() as server:
        yield server
