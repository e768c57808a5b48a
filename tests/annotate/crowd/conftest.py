import uuid
from decimal import Decimal

import pytest
from django.utils import timezone

from annotate.crowd.base import HitTypeSpec
from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import Hit, HitStatus, Publication
from annotate.crowd.services import publishing
from annotate.crowd.services.publishing import PublishSettings
from annotate.models import AnnotatorKind, AssignmentStatus
from tests.annotate.crowd.fake_mturk import FakeMTurkServer
from tests.factories import (
    AnnotatorFactory,
    AssignmentFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
    TaskFactory,
)


@pytest.fixture(autouse=True)
def fresh_fake_platform():
    FakePlatform.reset()
    yield
    FakePlatform.reset()


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


@pytest.fixture
def mturk_settings(settings, fake_mturk):
    """Point the real mturk back-end (boto3) at the fake server."""
    settings.CROWD_BACKEND = "mturk"
    settings.MTURK_ENDPOINT_URL = fake_mturk.url
    settings.MTURK_MAX_ATTEMPTS = 3
    settings.CROWD_SUBMIT_HOSTS = [*settings.CROWD_SUBMIT_HOSTS, fake_mturk.host]
    return settings


@pytest.fixture
def crowd_batch(db):
    """A batch of three tasks over two systems, each instruction with two questions."""
    task = TaskFactory(batch__project__assignments_per_task=3)
    batch = task.batch
    systems = [SystemFactory(name="sys-a"), SystemFactory(name="sys-b")]
    batch.project.systems.set(systems)
    tasks = [task, *(TaskFactory(batch=batch) for _ in range(2))]
    for n, t in enumerate(tasks):
        t.position = n
        t.save()
        for position in (1, 2):
            QuestionFactory(instruction=t.instruction, position=position)
        for system in systems:
            ResponseFactory(instruction=t.instruction, system=system)
    return batch


@pytest.fixture
def live(mturk_settings, fake_mturk, crowd_batch):
    """`crowd_batch` published on the fake MTurk server through boto3 (its three HITs made)."""
    publication = publishing.publication_create(
        batch=crowd_batch,
        platform_name="mturk",
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )
    return publishing.publication_publish(publication_id=publication.pk, now=timezone.now())


def crowd_assignment(*, task, platform="mturk", worker="AWORKER1", hit_id="", assignment_id=""):
    annotator = AnnotatorFactory(
        kind=AnnotatorKind.CROWD, platform=platform, worker_id=worker, name=f"{platform}:{worker}"
    )
    return AssignmentFactory(
        task=task,
        annotator=annotator,
        status=AssignmentStatus.SUBMITTED,
        submitted_at=timezone.now(),
        platform_hit_id=hit_id,
        platform_assignment_id=assignment_id,
    )


def fake_publication(batch, **fields) -> Publication:
    """A publication of `batch` on the offline platform, stored as publishing stores one."""
    return Publication.objects.create(
        **{
            "batch": batch, "platform": "fake", "title": "t", "description": "d",
            "reward_usd": Decimal("1"), "fee_rate": Decimal("0.25"), "assignments_per_task": 3,
            "assignment_duration_seconds": 60, "auto_approval_delay_seconds": 60,
            "lifetime_seconds": 60, "task_base_url": "https://x.org", "link_token": "tok",
            **fields,
        }
    )  # fmt: skip


def published_on_fake(batch, **chosen) -> Publication:
    """Publish `batch` on the offline platform (its HITs made there) with `PublishSettings`
    of title "t", description "d" and `chosen` (override any field)."""
    publication = publishing.publication_create(
        batch=batch,
        platform_name="fake",
        chosen=PublishSettings(**{"title": "t", "description": "d", **chosen}),
        base_url="https://annotate.example.org",
    )
    return publishing.publication_publish(publication_id=publication.pk, now=timezone.now())


def submitted_on_fake_platform(assignment, *, publication):
    """Make a crowd assignment real work on the offline platform: a HIT of `publication` for
    its task, accepted and submitted there by its worker (what a sync or an approve confirms)."""
    platform = FakePlatform()
    spec = HitTypeSpec(
        title="t", description="d", keywords="", reward=Decimal("1"),
        assignment_duration_seconds=60, auto_approval_delay_seconds=60,
        fee_rate=publication.fee_rate,
    )  # fmt: skip
    hit = Hit.objects.filter(publication=publication, task=assignment.task).first()
    if hit is None:
        info = platform.hit_create(
            hit_type_id=platform.hit_type_create(spec=spec), question_url="https://x.org/q",
            max_assignments=publication.assignments_per_task, lifetime_seconds=3600,
            unique_request_token=uuid.uuid4().hex,
        )  # fmt: skip
        hit = Hit.objects.create(
            publication=publication, task=assignment.task, hit_id=info.hit_id,
            unique_request_token=info.annotation, status=HitStatus.CREATED,
            max_assignments=publication.assignments_per_task,
        )  # fmt: skip
    worker_id = assignment.annotator.worker_id
    platform_id = platform.worker_accept(hit_id=hit.hit_id, worker_id=worker_id)
    platform.worker_submit(assignment_id=platform_id)
    assignment.platform_hit_id, assignment.platform_assignment_id = hit.hit_id, platform_id
    assignment.save(update_fields=["platform_hit_id", "platform_assignment_id"])
    return assignment


def publish_form(platform: str = "fake", **fields: str) -> dict[str, str]:
    """The publish page's form, filled in as an admin would (override any field)."""
    return {
        "platform": platform,
        "title": "Judge AI answers",
        "description": "Yes/no questions",
        "keywords": "ai",
        "reward_usd": "1.00",
        "assignment_minutes": "60",
        "auto_approval_hours": "72",
        "lifetime_hours": "168",
        "min_percent_approved": "90",
        "min_hits_approved": "500",
        "locale": "",
        "qualifications_json": "",
        **fields,
    }
