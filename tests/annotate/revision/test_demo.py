import pytest
from django.core.management import call_command

from annotate.revision.models import Rerating, RevisionSession, Study, Turn
from evaluation.revision.models import RevisionJudgeRun
from evaluation.revision.reports import revision_report_build

pytestmark = pytest.mark.django_db


def test_load_demo_gives_every_revision_table_numbers_and_is_idempotent(settings):
    settings.DEBUG = True
    call_command("load_demo")
    study = Study.objects.get(name="Demo revision study (KIWI)")
    counts = (
        RevisionSession.objects.count(),
        Turn.objects.count(),
        Rerating.objects.count(),
        RevisionJudgeRun.objects.count(),
    )
    assert counts == (6, 20, 8, 4)
    call_command("load_demo")
    assert (
        RevisionSession.objects.count(),
        Turn.objects.count(),
        Rerating.objects.count(),
        RevisionJudgeRun.objects.count(),
    ) == counts
    report = revision_report_build(study=study, n_resamples=50)
    assert [row["turns"] for row in report["table2"]] == [10, 10]
    assert report["table3"]["agreement"]["compared"] == 20
    assert report["table4"]["agreement"]["agreement"] is not None
    models = [row["model"] for row in report["table5"]["rows"]]
    assert models == ["Majority", "Random", "fake", "fake", "Human"]
    assert all(row["accuracy"] is not None for row in report["table5"]["rows"])
