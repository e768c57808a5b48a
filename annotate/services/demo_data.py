"""The demo: a small benchmark of our own (fixtures/demo) and one account per role.

Loading is idempotent: the imports add only what is missing and the users are created once, so
`make run` can load the demo every time it starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import transaction

from annotate.models import Annotator, AnnotatorKind, Label
from annotate.roles import ADMIN, ANNOTATOR, RESEARCHER
from annotate.services.imports import ImportSummary, instructions_import, responses_import
from annotate.services.label_imports import labels_import, scores_import

DEMO_DIR = Path(settings.BASE_DIR) / "fixtures" / "demo"
DEMO_BENCHMARK = "InFoBench demo"
# The LLM judge whose labels fixtures/demo/labels.csv brings, beside the judge configuration
# the demo runs in the app ("demo-judge (offline)"): the name says which one the Judges page
# does not list. Loads before 2026-11 named it "judge-demo".
DEMO_IMPORTED_JUDGE = "judge-demo (imported labels)"
_DEMO_IMPORTED_JUDGE_BEFORE = "judge-demo"


@dataclass(frozen=True)
class DemoLogin:
    username: str
    password: str
    role: str
    annotator: str = ""


DEMO_LOGINS = [
    DemoLogin("admin", "demo-admin", ADMIN),
    DemoLogin("researcher", "demo-researcher", RESEARCHER),
    DemoLogin("ana", "demo-ana", ANNOTATOR, annotator="expert-ana"),
    DemoLogin("ben", "demo-ben", ANNOTATOR, annotator="expert-ben"),
]


@transaction.atomic
def demo_benchmark_load(*, fixtures_dir: Path = DEMO_DIR) -> list[ImportSummary]:
    """Import the demo benchmark, three systems' responses, labels and direct scores."""
    summaries = [
        instructions_import(
            path=str(fixtures_dir / "instructions.jsonl"),
            benchmark_name=DEMO_BENCHMARK,
            description="A small benchmark written for the demo: easy and hard instructions.",
        )
    ]
    for path in sorted((fixtures_dir / "responses").glob("*.jsonl")):
        summaries.append(
            responses_import(path=str(path), benchmark_name=DEMO_BENCHMARK, system_name=path.stem)
        )
    from annotate.services.demo import (  # demo imports this module
        DEMO_EXPERTS,
        EXPERT_STUDY,
        demo_studies_record,
    )

    expert_labels = Label.objects.filter(annotator__name__in=DEMO_EXPERTS)
    before = expert_labels.count()
    demo_studies_record(fixtures_dir=fixtures_dir)
    recorded = expert_labels.count() - before
    _demo_imported_judge_rename()
    labels = labels_import(path=str(fixtures_dir / "labels.csv"), benchmark_name=DEMO_BENCHMARK)
    if recorded and labels.unchanged == recorded:
        # Not "already stored" on a fresh database: the expert study just gave them.
        labels.unchanged_why = (
            f"more were given just now by the demo experts, in the recorded study {EXPERT_STUDY!r}"
        )
    summaries.append(labels)
    summaries.append(
        scores_import(path=str(fixtures_dir / "scores.csv"), benchmark_name=DEMO_BENCHMARK)
    )
    return summaries


def _demo_imported_judge_rename() -> None:
    """Give an earlier load's imported judge its present name, so that loading again adds no
    second copy of its labels under the new name."""
    if not Annotator.objects.filter(name=DEMO_IMPORTED_JUDGE).exists():
        Annotator.objects.filter(
            name=_DEMO_IMPORTED_JUDGE_BEFORE, kind=AnnotatorKind.LLM, user=None
        ).update(name=DEMO_IMPORTED_JUDGE, judge_config=DEMO_IMPORTED_JUDGE)


@transaction.atomic
def demo_users_create() -> list[DemoLogin]:
    """Create one account per role (once) and link the annotators to the demo experts."""
    for login in DEMO_LOGINS:
        user, created = User.objects.get_or_create(username=login.username)
        if created:
            user.set_password(login.password)
            user.is_staff = user.is_superuser = login.role == ADMIN
            user.save()
        user.groups.add(Group.objects.get(name=login.role))
        if login.annotator:
            annotator, _ = Annotator.objects.get_or_create(
                name=login.annotator, defaults={"kind": AnnotatorKind.EXPERT}
            )
            if annotator.user_id is None:
                annotator.user = user
                annotator.save(update_fields=["user"])
    return DEMO_LOGINS
