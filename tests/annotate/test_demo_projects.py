import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from annotate.models import Project, ProjectMode
from annotate.services.demo import DEMO_PROJECTS

pytestmark = pytest.mark.django_db


def test_load_demo_creates_demo_projects_once_with_work_for_the_demo_annotators(
    client, capsys, settings
):
    settings.DEBUG = True
    call_command("load_demo")
    call_command("load_demo")
    out = capsys.readouterr().out
    assert "cara" in out and "demo-cara" in out
    assert Project.objects.count() == len(DEMO_PROJECTS)
    both = Project.objects.get(mode=ProjectMode.BOTH)
    assert both.batches.get().tasks.count() == both.benchmark.instructions.count()
    assert both.systems.count() == 3
    assert both.researchers.filter(username="researcher").exists()

    client.force_login(User.objects.get(username="cara"))
    dashboard = client.get(reverse("work:dashboard"))
    assert dashboard.text.count("Start next task") == len(DEMO_PROJECTS)
    started = client.post(reverse("work:start-next", args=[both.id]))
    task_page = client.get(started["Location"])
    assert task_page.status_code == 200 and "System C" in task_page.text
