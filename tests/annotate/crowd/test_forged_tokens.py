"""A worker token signed with a key anyone can know (the old built-in default) opens no task."""

import pytest
from django.core import signing
from django.urls import reverse

from annotate.crowd.services.workers import TOKEN_SALT, assignment_token
from tests.annotate.crowd.conftest import crowd_assignment

OLD_BUILT_IN_KEY = "insecure-embedded-default-key-change-me"


@pytest.mark.django_db
def test_a_worker_token_forged_with_the_old_built_in_key_opens_no_task(client, crowd_batch):
    assignment = crowd_assignment(task=crowd_batch.tasks.first(), platform="fake", worker="W1")
    forged = signing.dumps(
        {"a": assignment.pk, "s": ""}, key=OLD_BUILT_IN_KEY, salt=TOKEN_SALT, compress=True
    )
    assert client.get(reverse("crowd:work-task", args=[forged])).status_code == 404
    genuine = assignment_token(assignment=assignment)
    assert client.get(reverse("crowd:work-task", args=[genuine])).status_code != 404
