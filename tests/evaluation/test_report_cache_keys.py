"""A cached report is served only while what it was computed from is unchanged.

Each test reads a report through the cache (as the report page, its figures and the API do),
changes what the report reads through one of the app's ways of writing it, and reads again: the
number must be the new one. The labels here never change; what moves is what they are about
(their instruction's subset, their question's constraint types, their response's system).
"""

from __future__ import annotations

import pytest

from annotate.models import ConstraintType, Instruction, Question, Response, Subset, System
from annotate.selectors.identities import OPERATOR
from evaluation.services.reports import report_cached

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(superuser_client):
    return superuser_client


def _report(bench) -> dict:
    return report_cached(benchmark=bench, scope=OPERATOR)


def _dataset(bench, subset: str) -> dict:
    return next(row for row in _report(bench)["dataset"] if row["subset"] == subset)


def _systems(bench) -> set[str]:
    return {row["system"] for row in _report(bench)["leaderboard"]}


def _admin_form(admin_client, url: str) -> dict:
    """The change page's form as the browser would send it unchanged."""
    form = admin_client.get(url).context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is not None:
            data[name] = getattr(value, "pk", value)
    return data


def test_an_instruction_moved_to_another_subset_in_the_admin_is_counted_there(admin_client, bench):
    """Table 2's counts per subset follow an instruction's subset corrected on its change page
    (with its questions inline, sent back unchanged)."""
    assert _dataset(bench, "easy")["instructions"] == 1
    easy = Instruction.objects.get(benchmark=bench, subset=Subset.EASY)
    url = f"/admin/annotate/instruction/{easy.pk}/change/"
    form = _admin_form(admin_client, url)
    questions = list(easy.questions.order_by("position"))
    form.update(
        {
            "subset": Subset.HARD,
            "questions-TOTAL_FORMS": len(questions),
            "questions-INITIAL_FORMS": len(questions),
            "questions-MIN_NUM_FORMS": 0,
            "questions-MAX_NUM_FORMS": 1000,
        }
    )
    for i, question in enumerate(questions):
        form.update(
            {
                f"questions-{i}-id": question.pk,
                f"questions-{i}-instruction": easy.pk,
                f"questions-{i}-position": question.position,
                f"questions-{i}-text": question.text,
                f"questions-{i}-constraint_mask": question.constraint_mask,
            }
        )
    assert admin_client.post(url, form).status_code == 302
    assert Instruction.objects.get(pk=easy.pk).subset == Subset.HARD

    assert _dataset(bench, "easy")["instructions"] == 0
    assert _dataset(bench, "hard")["instructions"] == 2


def test_a_questions_constraint_types_corrected_in_the_admin_are_counted(admin_client, bench):
    """Table 6 counts questions per constraint type: a type corrected on the question's change
    page is counted under the new type."""

    def style_questions() -> int:
        rows = _report(bench)["constraint_types"]
        return next(row["style"] for row in rows if row["subset"] == "overall")

    assert style_questions() == 0
    question = Question.objects.filter(instruction__benchmark=bench).order_by("id").first()
    url = f"/admin/annotate/question/{question.pk}/change/"
    form = {**_admin_form(admin_client, url), "constraint_mask": ConstraintType.STYLE}
    assert admin_client.post(url, form).status_code == 302

    assert style_questions() == 1


def test_a_response_given_to_another_system_in_the_admin_is_reported_under_it(admin_client, bench):
    response = Response.objects.filter(system__name="alpha").order_by("id").first()
    gamma = System.objects.create(name="gamma")
    assert _systems(bench) == {"alpha", "beta"}
    url = f"/admin/annotate/response/{response.pk}/change/"
    form = {**_admin_form(admin_client, url), "system": gamma.pk}
    assert admin_client.post(url, form).status_code == 302

    assert _systems(bench) == {"alpha", "beta", "gamma"}


def test_a_system_renamed_in_the_admin_is_reported_by_its_new_name(admin_client, bench):
    alpha = System.objects.get(name="alpha")
    assert _systems(bench) == {"alpha", "beta"}
    url = f"/admin/annotate/system/{alpha.pk}/change/"
    form = {**_admin_form(admin_client, url), "name": "alpha-v2"}
    assert admin_client.post(url, form).status_code == 302

    assert _systems(bench) == {"alpha-v2", "beta"}


def test_a_response_a_generation_run_replaced_is_reported_under_the_retired_system(bench):
    """A generation run that replaces a response moves it, with its labels, to the system's
    retired version (a queryset update of the response): the labels are counted there."""
    from annotate.engine.models import EngineRun
    from annotate.engine.services.generation import generation_response_retire
    from tests.annotate.engine.conftest import make_endpoint

    assert _systems(bench) == {"alpha", "beta"}
    run = EngineRun.objects.create(kind="generation", endpoint=make_endpoint(""), params={})
    for response in Response.objects.filter(instruction__benchmark=bench, system__name="alpha"):
        generation_response_retire(response=response, run=run)

    assert _systems(bench) == {f"alpha (replaced by run {run.pk})", "beta"}


def test_an_instructions_domain_changed_by_an_update_is_counted(bench):
    """Any write counts, a queryset update (a shell, a script) as well as a page's save."""
    assert _dataset(bench, "easy")["domains"] == 1
    Instruction.objects.filter(benchmark=bench, subset=Subset.EASY).update(category="")

    assert _dataset(bench, "easy")["domains"] == 0


def test_an_annotator_renamed_in_the_admin_changes_whose_ratings_agreement_keeps(
    admin_client, bench
):
    """Agreement keeps an item's first n raters in name order (n: the most common number of
    raters): a fourth expert on i1 named last is left out there; renamed to come first, it is
    kept and expert-3 is left out, so the kappa read through the cache is the new one."""
    from annotate.models import AnnotatorKind
    from evaluation.services.reports import report_build
    from tests.factories import AnnotatorFactory, DirectScoreFactory

    def kappa(report) -> float:
        rows = report["agreement"]
        return next(
            r["fleiss_kappa"]
            for r in rows
            if (r["protocol"], r["group"], r["subset"]) == ("ds", "expert", "overall")
        )

    fourth = AnnotatorFactory(name="expert-4", kind=AnnotatorKind.EXPERT)
    easy = Instruction.objects.get(benchmark=bench, subset=Subset.EASY)
    for system, score in (("alpha", 5), ("beta", 1)):  # A better; expert-3 said B better
        response = Response.objects.get(instruction=easy, system__name=system)
        DirectScoreFactory(response=response, annotator=fourth, score=score)
    before = kappa(_report(bench))
    url = f"/admin/annotate/annotator/{fourth.pk}/change/"
    form = {**_admin_form(admin_client, url), "name": "expert-0"}
    assert admin_client.post(url, form).status_code == 302

    fresh = kappa(report_build(scope=OPERATOR, benchmark=bench, n_resamples=10))
    assert fresh != before
    assert kappa(_report(bench)) == fresh
