"""A report figure on a cache miss computes only the table it draws (report_cached's `tables`),
with the same numbers as the whole report: the same figure, byte for byte."""

import pytest
from django.core.cache import cache
from django.urls import reverse

from annotate.selectors.identities import identity_scope
from evaluation import figures
from evaluation.services import reports
from evaluation.services.reports import REPORT_TABLES, report_build, report_compute

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("table", REPORT_TABLES)
def test_each_table_alone_is_the_whole_reports_table(bench, table):
    whole = report_compute(benchmark=bench, n_resamples=200, seed=7)
    alone = report_compute(benchmark=bench, n_resamples=200, seed=7, tables=[table])
    assert alone[table] == whole[table]
    assert alone["systems"] == whole["systems"] and alone["subsets"] == whole["subsets"]
    # The agreement's intervals need the leaderboard's resampled first: it comes along.
    assert set(alone) & set(REPORT_TABLES) == {table} | (
        {"leaderboard"} if table == "agreement" else set()
    )


def test_an_unknown_table_is_refused(bench):
    with pytest.raises(ValueError, match="unknown report tables \\['cost'\\]"):
        report_compute(benchmark=bench, tables=["cost"])


def _no_whole_report(monkeypatch) -> None:
    """Make the parts only the whole report computes fail: the kappas and Table 4's costs."""

    def whole_report_only(*args, **kwargs):
        raise AssertionError("the whole report was computed for one figure")

    monkeypatch.setattr(reports, "_agreement", whole_report_only)
    monkeypatch.setattr(reports, "source_costs", whole_report_only)
    monkeypatch.setattr(reports, "source_costs_and_kinds", whole_report_only)


@pytest.mark.parametrize("way", ["page", "api"])
@pytest.mark.parametrize("name", figures.FIGURES)
def test_a_figure_on_a_cold_cache_is_the_whole_reports_figure(
    client, researcher, bench, monkeypatch, name, way
):
    cache.clear()
    client.force_login(researcher)
    url_name = "reports:figure" if way == "page" else "api-report-figure"
    with monkeypatch.context() as patched:
        _no_whole_report(patched)
        figure = client.get(reverse(url_name, args=[bench.pk, name, "svg"]))
        assert figure.status_code == 200
    whole = report_build(benchmark=bench, scope=identity_scope(user=researcher))
    assert figure.content == figures.render_figure(whole, name, "svg")


def test_a_figure_takes_the_whole_report_when_it_is_cached(client, researcher, bench, monkeypatch):
    client.force_login(researcher)
    assert client.get(reverse("reports:detail", args=[bench.pk])).status_code == 200

    def computed_again(**options):
        raise AssertionError("computed again though the whole report was cached")

    monkeypatch.setattr(reports, "report_compute", computed_again)
    figure = client.get(reverse("reports:figure", args=[bench.pk, "leaderboard", "svg"]))
    assert figure.status_code == 200
