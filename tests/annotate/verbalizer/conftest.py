import pytest

from tests.evaluation.openai_stub import StubOpenAI


@pytest.fixture
def stub():
    with StubOpenAI() as server:
        yield server
