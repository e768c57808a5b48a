import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotate.engine.models import EngineRun
from annotate.models import Project, ProjectMode, Response
from annotate.services.demo import DEMO_GENERATING_SYSTEM, DEMO_PROJECTS

pytestmark = pytest.mark.django_db


def test_load_demo_creates_demo_projects_once_with_work_for_the_demo_annotators(
    client, capsys, settings
):
    settings.DEBUG = True
    call_command("load_demo")
    call_command("load_demo")
    out = capsys.readouterr().out
    assert "cara" in out and "demo-cara" in out
    # Two open studies, and the finished expert and crowd studies the report draws on.
    assert Project.objects.count() == len(DEMO_PROJECTS) + 2
    assert Project.objects.filter(batches__active=True).distinct().count() == len(DEMO_PROJECTS)
    both = Project.objects.get(mode=ProjectMode.BOTH)
    assert both.batches.get().tasks.count() == both.benchmark.instructions.count()
    assert both.systems.count() == 3
    assert both.researchers.filter(username="researcher").exists()
    # One system generates its responses through the offline fake endpoint, once.
    generated = Response.objects.filter(system__name=DEMO_GENERATING_SYSTEM)
    assert generated.count() == both.benchmark.instructions.count()
    assert all(r.generated_by.status == "ok" and r.text for r in generated)
    assert EngineRun.objects.filter(kind="generation", status="done").count() == 1
    assert "0 responses generated" in out  # the second load made no call

    client.force_login(User.objects.get(username="cara"))
    dashboard = client.get(reverse("work:dashboard"))
    assert dashboard.text.count("Start next task") == len(DEMO_PROJECTS)
    started = client.post(reverse("work:start-next", args=[both.id]))
    task_page = client.get(started["Location"])
    assert task_page.status_code == 200 and "System C" in task_page.text


def test_the_demo_prints_each_login_with_what_to_do_at_the_chosen_address(capsys, settings):
    from evaluation.models import JudgeConfig

    settings.DEBUG = True
    call_command("load_demo", "--base-url", "http://127.0.0.1:8123")
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8123/accounts/login/" in out and ":8000" not in out
    for username in ("admin", "researcher", "ana", "ben", "cara", "dev"):
        line = next(line for line in out.splitlines() if f" {username} " in line)
        assert len(line.split("password:")[1].split()) > 1, line  # a note after the password
    judge = JudgeConfig.objects.get(name="demo-judge (offline)")
    assert judge.endpoint.base_url == ""  # the offline fake back-end


def test_the_demo_report_has_expert_crowd_and_judge_with_cost_and_time(settings):
    from annotate.models import Benchmark
    from annotate.selectors.identities import OPERATOR
    from annotate.services.demo_data import DEMO_BENCHMARK
    from evaluation.services.reports import report_build

    settings.DEBUG = True
    settings.DEBUG = True
    call_command("load_demo", stdout=io.StringIO())
    report = report_build(
        scope=OPERATOR, benchmark=Benchmark.objects.get(name=DEMO_BENCHMARK), n_resamples=10
    )
    overall = {row["source"]: row for row in report["sources"] if row["subset"] == "overall"}
    for source in ("expert-majority", "crowd-majority", "demo-judge (offline)"):
        assert overall[source]["cost_usd"] > 0, source
        assert overall[source]["time_min"] is not None, source
    kappa = {
        (row["protocol"], row["group"]): row["fleiss_kappa"]
        for row in report["agreement"]
        if row["subset"] == "overall"
    }
    assert round(kappa[("drfr", "expert")], 3) == 0.369  # the demo's expert numbers as before
    assert ("drfr", "crowd") in kappa


def test_the_demo_names_its_two_llm_judges_so_a_reader_tells_which_is_imported(settings):
    """The report shows two LLM judges and the Judges page one configuration: the imported
    judge's name says it is only labels."""
    from annotate.models import Benchmark
    from annotate.selectors.identities import OPERATOR
    from annotate.services.demo_data import DEMO_BENCHMARK
    from evaluation.models import JudgeConfig
    from evaluation.services.reports import report_build

    settings.DEBUG = True
    call_command("load_demo", stdout=io.StringIO())
    report = report_build(
        scope=OPERATOR, benchmark=Benchmark.objects.get(name=DEMO_BENCHMARK), n_resamples=10
    )
    sources = {row["source"] for row in report["sources"]}
    assert {"demo-judge (offline)", "judge-demo (imported labels)"} <= sources
    assert "judge-demo" not in sources
    assert list(JudgeConfig.objects.values_list("name", flat=True)) == ["demo-judge (offline)"]


def test_loading_the_demo_again_renames_an_earlier_loads_imported_judge(settings):
    from annotate.models import Annotator, AnnotatorKind, Label

    settings.DEBUG = True
    call_command("load_demo", stdout=io.StringIO())
    Annotator.objects.filter(name="judge-demo (imported labels)").update(
        name="judge-demo", judge_config="judge-demo"
    )
    labels = Label.objects.count()
    call_command("load_demo", stdout=io.StringIO())
    assert Label.objects.count() == labels  # no second copy under the new name
    assert not Annotator.objects.filter(name="judge-demo").exists()
    judge = Annotator.objects.get(name="judge-demo (imported labels)", kind=AnnotatorKind.LLM)
    assert judge.judge_config == judge.name and judge.labels.count() == 95


def test_the_demo_note_counts_the_instructions_an_annotator_can_take_over_both_studies(settings):
    from annotate.errors import NoWorkError
    from annotate.services.assignments import (
        annotator_for_user,
        assignment_claim_next,
        assignment_return,
    )
    from annotate.services.demo import DEMO_LOGIN_NOTES

    settings.DEBUG = True
    call_command("load_demo", stdout=io.StringIO())
    cara = annotator_for_user(user=User.objects.get(username="cara"))
    studies = [Project.objects.get(name=name) for name, _mode in DEMO_PROJECTS]
    taken = []
    for project in studies:  # whatever she takes in the first study leaves the second
        while True:
            try:
                claim = assignment_claim_next(annotator=cara, project=project, now=timezone.now())
            except NoWorkError:
                break
            taken.append((project.pk, claim.task.instruction_id))
            assignment_return(assignment_id=claim.pk, annotator=cara, now=timezone.now())
    note = DEMO_LOGIN_NOTES["cara"]
    assert f"{len(taken)} instructions between the two demo studies" in note
    assert "in each" not in note
    assert {pk for pk, _instruction in taken} == {studies[0].pk}


def test_the_demo_records_of_finished_studies_show_every_task_done(settings):
    from annotate.selectors.work import project_progress
    from annotate.services.demo import CROWD_STUDY, EXPERT_STUDY

    settings.DEBUG = True
    call_command("load_demo", stdout=io.StringIO())
    for name in (EXPERT_STUDY, CROWD_STUDY):  # each called "(finished)" on its page
        progress = project_progress(project=Project.objects.get(name=name), now=timezone.now())
        assert progress.tasks_total > 0
        assert progress.tasks_done == progress.tasks_total, name


def test_the_demo_notes_of_every_annotator_name_the_other_methods_work(client, settings):
    """ana and ben were said to have "nothing left", yet the demo readers' label-word study and
    the revision sessions are open to them as to cara and dev, who also have a turn to rate
    again: a new user reading the logins should know where each method's work is."""
    from annotate.revision.models import RerateStatus, Rerating
    from annotate.services.demo import DEMO_LOGIN_NOTES
    from annotate.verbalizer.demo import STUDY

    settings.DEBUG = True
    call_command("load_demo", stdout=io.StringIO())
    for username in ("ana", "ben", "cara", "dev"):
        note = DEMO_LOGIN_NOTES[username]
        client.force_login(User.objects.get(username=username))
        assert STUDY in client.get("/verbalizer/work/").content.decode()
        assert "Start a session" in client.get("/revision/").content.decode()
        assert "label-word tasks and revision sessions open" in note, username
        assert "nothing left" not in note, username
        pending = Rerating.objects.filter(
            annotator__username=username, status=RerateStatus.PENDING
        ).exists()
        assert pending == ("a turn to rate again" in note), username
