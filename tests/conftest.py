import pytest

from annotate.roles import ADMIN, ANNOTATOR, RESEARCHER
from tests.factories import UserFactory


@pytest.fixture
def admin_user(db):
    return UserFactory(username="admin-user", roles=[ADMIN], is_staff=True)


@pytest.fixture
def researcher(db):
    return UserFactory(username="researcher-user", roles=[RESEARCHER])


@pytest.fixture
def annotator_user(db):
    return UserFactory(username="annotator-user", roles=[ANNOTATOR])
