"""manage.py revision_judge: the spending cap and the dry run on an engine endpoint."""

import re
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotate.engine.models import EngineRun
from annotate.engine.services import engine_run_estimate
from annotate.revision.models import Turn
from annotate.templatetags.money import usd_at_most
from evaluation.revision.judges import judge_run_prepare
from evaluation.revision.models import RevisionJudgeRun
from tests.annotate.engine.conftest import dollar_a_thousand
from tests.evaluation.openai_stub import StubOpenAI
from tests.evaluation.revision.sample import sample_study

pytestmark = pytest.mark.django_db

CLASSIFY = ["--task", "instruction-category", "--endpoint", "stub"]


def test_the_spending_cap_stops_the_run_and_the_command_fails_saying_why(tmp_path, capsys):
    # As in test_judge_engine: under $2.50 the $1-per-1k endpoint classifies 2 of the 6 turns.
    study = sample_study(tmp_path)
    with StubOpenAI() as stub:
        dollar_a_thousand(stub, concurrency=1)
        with pytest.raises(CommandError, match="the next call would exceed the spending cap"):
            call_command(
                "revision_judge", "--study", study.name, *CLASSIFY, "--spending-cap", "2.5"
            )
        assert len(stub.requests) == 2
    run = RevisionJudgeRun.objects.get()
    assert run.engine_run.spending_cap_usd == Decimal("2.5") and run.predictions.count() == 2
    out = capsys.readouterr().out
    assert out.startswith(f"Run {run.pk} (instruction-category): failed,")  # no "category )"


def test_the_dry_run_prints_the_estimate_and_keeps_nothing(tmp_path, capsys):
    study = sample_study(tmp_path)
    with StubOpenAI() as stub:
        endpoint = dollar_a_thousand(stub, concurrency=1)
        call_command("revision_judge", "--study", study.name, *CLASSIFY, "--dry-run")
        assert stub.requests == []
    assert not RevisionJudgeRun.objects.exists() and not EngineRun.objects.exists()
    run = judge_run_prepare(
        study=study, task="instruction-category", endpoint=endpoint, user=None, now=timezone.now()
    )
    estimate = engine_run_estimate(run=run.engine_run)
    assert capsys.readouterr().out == (
        "Dry run (nothing sent, no run kept): 6 turns to label (0 done already), 6 calls, "
        f"about {estimate.prompt_tokens} prompt + at most 600 completion tokens, "
        f"at most {usd_at_most(estimate.cost_usd)} (${estimate.cost_usd}).\n"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--endpoint", "stub", "--spending-cap", "-1"],
            "argument --spending-cap: The spending cap",
        ),
        (["--spending-cap", "5"], "--spending-cap and --dry-run need --endpoint"),
        (["--dry-run"], "--spending-cap and --dry-run need --endpoint"),
        (["--endpoint", "nope"], "nope"),
    ],
)
def test_bad_options_are_refused_and_nothing_is_kept(tmp_path, arguments, message):
    study = sample_study(tmp_path)
    with StubOpenAI() as stub:
        dollar_a_thousand(stub, concurrency=1)
        with pytest.raises(CommandError, match=message):
            call_command(
                "revision_judge", "--study", study.name, "--task", "error-category", *arguments
            )
        assert stub.requests == []
    assert not RevisionJudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_a_study_too_small_for_a_test_split_is_refused_saying_how_small(tmp_path):
    """3 rated turns passed the check ("at least 3") and then failed as "the test split is
    empty": the paper's fractions give 3 turns no test turn."""
    study = sample_study(tmp_path)
    turns = Turn.objects.filter(session__study=study)
    turns.exclude(pk__in=list(turns.order_by("id").values_list("pk", flat=True)[:3])).update(
        rating=""
    )
    with pytest.raises(CommandError, match=r"at least 4 rated turns .* it has 3"):
        call_command("revision_judge", "--study", study.name, "--task", "rating-judge")
    assert not RevisionJudgeRun.objects.exists()


def test_a_run_on_an_endpoint_shows_its_progress_on_standard_error(tmp_path, capsys):
    """The command was silent until the run ended (1,260 turns on a paid endpoint: minutes of
    nothing), while generate, judge and verbalizer_run draw a progress bar."""
    study = sample_study(tmp_path)
    with StubOpenAI() as stub:
        dollar_a_thousand(stub, concurrency=1)
        call_command("revision_judge", "--study", study.name, *CLASSIFY)
    captured = capsys.readouterr()
    assert re.search(r"6/6 \[[^\]]*turn", captured.err)  # "…, 3.1turn/s]" or "…, 1.2s/turn]"
    assert captured.out.startswith("Run ")  # the summary stays on standard output


def test_the_summary_counts_one_label_in_the_singular(tmp_path, capsys):
    """It said "done, 1 labels."."""
    study = sample_study(tmp_path)
    turns = Turn.objects.filter(session__study=study).order_by("id")
    turns.exclude(pk=turns.first().pk).delete()
    call_command("revision_judge", "--study", study.name, "--task", "instruction-category")
    assert re.fullmatch(
        r"Run \d+ \(instruction-category\): done, 1 label\.\n", capsys.readouterr().out
    )
