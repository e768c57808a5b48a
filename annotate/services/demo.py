"""Demo annotation projects on the demo benchmark, with accounts of annotators to do them.

The demo experts (ana, ben) already labelled every demo instruction, and an annotator labels a
response once, so the projects get two fresh annotator accounts. Safe to run again.
"""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.db import transaction

from annotate.models import Benchmark, Project, ProjectMode, System
from annotate.roles import ADMIN, ANNOTATOR
from annotate.services.demo_data import DEMO_BENCHMARK, DemoLogin
from annotate.services.projects import InstructionSelection, project_create

DEMO_ANNOTATOR_LOGINS = [
    DemoLogin("cara", "demo-cara", ANNOTATOR),
    DemoLogin("dev", "demo-dev", ANNOTATOR),
]
DEMO_PROJECTS = [
    ("Demo study: decomposed questions", ProjectMode.DRFR),
    ("Demo study: direct score, then questions", ProjectMode.BOTH),
]


@transaction.atomic
def demo_projects_create() -> list[DemoLogin]:
    """Create the demo annotators and the demo projects (each once); return the logins."""
    for login in DEMO_ANNOTATOR_LOGINS:
        user, created = User.objects.get_or_create(username=login.username)
        if created:
            user.set_password(login.password)
            user.save()
        user.groups.add(Group.objects.get(name=login.role))
    benchmark = Benchmark.objects.get(name=DEMO_BENCHMARK)
    systems = list(System.objects.filter(responses__instruction__benchmark=benchmark).distinct())
    creator = User.objects.filter(groups__name=ADMIN).order_by("pk").first()
    for name, mode in DEMO_PROJECTS:
        if Project.objects.filter(name=name).exists():
            continue
        project = project_create(
            name=name,
            benchmark=benchmark,
            systems=systems,
            selection=InstructionSelection(),
            mode=mode,
            assignments_per_task=2,
            allotted_minutes=30,
            created_by=creator,
        )
        project.researchers.set(User.objects.filter(groups__name="researcher"))
    return DEMO_ANNOTATOR_LOGINS
