import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_report_page_figures_downloads_and_api(client, researcher, with_humans):
    client.force_login(researcher)
    set_id = with_humans.pk
    page = client.get(reverse("verbalizer-reports:detail", args=[set_id]))
    assert page.status_code == 200
    assert b"unnatural flipped golden, CoT" in page.content
    assert b"-0.500" in page.content  # Fleiss' kappa of the people
    # Both items split 2 to 1: kappa -0.5 in every resample, an interval n/a with why, not
    # "-0.500 to -0.500".
    agreement = page.content.decode().split('id="agreement"')[1].split("</table>")[0]
    assert "<td>-0.500</td><td>n/a</td>" in agreement and "-0.500 to" not in agreement
    assert "95% CI n/a: every resample gives the same kappa" in agreement
    assert b"(1,000 resamples, seed 0)" in page.content  # grouped, as the Markdown says it
    svg = client.get(reverse("verbalizer-reports:figure", args=[set_id, "groups", "svg"]))
    assert svg["Content-Type"] == "image/svg+xml" and b"human" in svg.content
    csv = client.get(reverse("verbalizer-reports:download", args=[set_id, "csv"]))
    assert csv.content.startswith(b"system,dataset,group,mapping")
    api = client.get(reverse("api-verbalizer-report", args=[set_id])).json()
    assert {r["system"] for r in api["rows"]} == {"m1", "human", "human-majority"}


def test_replies_page_shows_raw_reply_beside_both_parses_escaped(client, researcher, small_set):
    from annotate.verbalizer.models import ModelAnswer

    ModelAnswer.objects.filter(reply="foo").update(reply="<b>foo</b>")
    client.force_login(researcher)
    page = client.get(
        reverse("verbalizer-reports:replies", args=[small_set.pk]), {"mapping": "foo|bar"}
    )
    assert page.status_code == 200
    shown = [(a.reply, strict, lenient) for a, strict, lenient in page.context["shown"]]
    assert shown == [("The answer is foo", "invalid", "foo"), ("<b>foo</b>", "invalid", "foo")]
    assert b"&lt;b&gt;foo&lt;/b&gt;" in page.content and b"<b>foo</b>" not in page.content


def test_annotators_get_no_report(client, annotator_user, small_set):
    client.force_login(annotator_user)
    assert client.get(reverse("api-verbalizer-report", args=[small_set.pk])).status_code == 404


def test_a_set_without_answers_has_an_empty_report_and_a_page(client, researcher, db):
    from annotate.verbalizer.services.sets import evaluation_set_create
    from evaluation.verbalizer.report import verbalizer_report
    from tests.annotate.verbalizer.helpers import fill

    fill("SST-2", [True])
    s = evaluation_set_create(name="empty", datasets=["SST-2"], items=1, seed=1).evaluation_set
    report = verbalizer_report(evaluation_set=s)
    assert (report["rows"], report["groups"], report["agreement"]) == ([], [], [])
    client.force_login(researcher)
    page = client.get(reverse("verbalizer-reports:detail", args=[s.pk]))
    assert page.status_code == 200
    # Says what to do, with the way there; the tables said nothing under their headings.
    html = page.content.decode()
    set_page = reverse("verbalizer:set-detail", args=[s.pk])
    assert f'<a href="{set_page}#run-system">run a system on this set</a>' in html
    assert html.count("<td colspan") == 5  # per group, Figures 3 and 4, agreement, every row
    for empty in ("No answer to a direct prompt yet.", "No answer to a direct natural or "
                  "unnatural prompt yet.", "No answer under golden or flipped golden yet.",
                  "No human answers yet.", "No answers yet."):  # fmt: skip
        assert f"{empty}</td>" in html
    figure = client.get(reverse("verbalizer-reports:figure", args=[s.pk, "groups", "svg"]))
    assert figure.status_code == 404


def test_the_cached_report_follows_new_answers(small_set):
    from annotate.verbalizer.models import ModelAnswer, Prompt
    from evaluation.verbalizer.report import verbalizer_report_cached

    def golden_cot():
        report = verbalizer_report_cached(evaluation_set=small_set)
        return [r for r in report["rows"] if (r["mapping"], r["mode"]) == ("golden", "cot")]

    assert golden_cot() == []
    run = ModelAnswer.objects.first().run
    prompt = Prompt.objects.get(mapping__name="golden", mode="cot", item__position=1)
    ModelAnswer.objects.create(prompt=prompt, system=run.system, run=run, reply="positive")
    assert [(r["n"], r["accuracy_strict"]) for r in golden_cot()] == [(1, 1.0)]


def test_a_figure_is_drawn_once_per_state_of_the_answers(
    client, researcher, small_set, monkeypatch
):
    """The report page loads four figures, each drawn in seconds, on every load: a second
    request is served the figure drawn for the first; a new answer draws it anew."""
    from annotate.verbalizer.models import ModelAnswer
    from evaluation.verbalizer import figures
    from tests.evaluation.verbalizer.conftest import answer

    drawn, draw = [], figures.render_figure
    monkeypatch.setattr(
        figures, "render_figure", lambda report, *how: drawn.append(how) or draw(report, *how)
    )
    client.force_login(researcher)

    def figure(fmt: str = "svg") -> bytes:
        url = reverse("verbalizer-reports:figure", args=[small_set.pk, "groups", fmt])
        response = client.get(url)
        assert response.status_code == 200
        return response.content

    first = figure()
    assert figure() == first and drawn == [("groups", "svg")]
    assert figure("png").startswith(b"\x89PNG") and drawn[-1] == ("groups", "png")
    wrong = ModelAnswer.objects.get(prompt__mapping__name="foo|bar", reply="foo")
    wrong.delete()
    answer(wrong.run, wrong.prompt, "bar")  # neutral, direct: 50 % right, now 100 %
    redrawn = figure()
    assert len(drawn) == 3 and redrawn != first
    assert figure() == redrawn and len(drawn) == 3


def test_human_answers_csv_gives_the_id_each_item_had_in_its_file(client, researcher, with_humans):
    """`item` is the item's place in its imported file; the id the file gave it was kept on
    import and never exported: it comes last, after the columns that were there before."""
    import csv
    import io

    from annotate.verbalizer.models import ClassificationItem

    for item in ClassificationItem.objects.filter(dataset__name="SST-2"):
        item.external_id = f"sst2-dev-{100 + item.position}"
        item.save()
    client.force_login(researcher)
    url = reverse("verbalizer-reports:human-answers", args=[with_humans.pk])
    text = b"".join(client.get(url).streaming_content).decode()
    header, *rows = list(csv.reader(io.StringIO(text)))
    assert header == [
        "study", "prompt", "dataset", "item", "mapping", "mode", "annotator", "people",
        "platform", "word", "expected_word", "seconds", "platform_hit_id",
        "platform_assignment_id", "status", "work_status", "answered_at", "item_source_id",
        "changed_from", "changed_at", "reject_reason",
    ]  # fmt: skip
    assert len(rows) == 6
    source = header.index("item_source_id")
    assert {(r[header.index("item")], r[source]) for r in rows} == {
        ("1", "sst2-dev-101"),
        ("2", "sst2-dev-102"),
    }


def test_csv_rows_have_every_json_column_with_its_value(client, researcher, small_set, capsys):
    """docs/verbalizer.md: "CSV has the same columns" as the JSON rows, on the page's download
    and from `verbalizer_report --format csv` alike (invalid_lenient included)."""
    import csv
    import io
    import json

    from django.core.management import call_command

    call_command("verbalizer_report", "--set", small_set.name, "--format", "json")
    rows = json.loads(capsys.readouterr().out)
    call_command("verbalizer_report", "--set", small_set.name, "--format", "csv")
    from_command = capsys.readouterr().out
    client.force_login(researcher)
    download = client.get(reverse("verbalizer-reports:download", args=[small_set.pk, "csv"]))
    for text in (from_command, download.content.decode()):
        table = list(csv.DictReader(io.StringIO(text)))
        assert len(table) == len(rows) > 0
        for csv_row, json_row in zip(table, rows, strict=True):
            assert set(csv_row) == set(json_row)
            assert csv_row == {k: "" if v is None else str(v) for k, v in json_row.items()}


def _main_nav(html: str) -> str:
    return html.split('<nav aria-label="Main"', 1)[1].split("</nav>", 1)[0]


def test_report_pages_lead_back_to_the_set_above_the_heading_not_in_the_main_navigation(
    client, researcher, small_set
):
    client.force_login(researcher)
    set_url = reverse("verbalizer:set-detail", args=[small_set.pk])
    report_url = reverse("verbalizer-reports:detail", args=[small_set.pk])
    html = client.get(report_url).content.decode()
    assert _main_nav(html).count("<a ") == _main_nav(html).count("data-section=")
    assert f'<p><a href="{set_url}">← Set {small_set.name}</a></p>' in html
    html = client.get(reverse("verbalizer-reports:replies", args=[small_set.pk])).content.decode()
    assert _main_nav(html).count("<a ") == _main_nav(html).count("data-section=")
    assert f'<p><a href="{report_url}">← Report {small_set.name}</a></p>' in html


def test_report_page_says_which_rule_the_interval_and_invalid_columns_follow(
    client, researcher, small_set
):
    """Chain-of-thought rows read strict "n/a" beside "Invalid 0.0": the invalid share and the
    interval are the lenient rule's, which the headings did not say."""
    from annotate.verbalizer.models import ModelAnswer
    from tests.evaluation.verbalizer.conftest import answer

    # Replaced, not updated: the cached report is keyed on the answers' count and last id.
    for old in ModelAnswer.objects.filter(prompt__mapping__name="foo|bar"):
        old.delete()
        answer(old.run, old.prompt, "I cannot tell")
    client.force_login(researcher)
    html = client.get(reverse("verbalizer-reports:detail", args=[small_set.pk])).content.decode()
    assert (
        html.count("<th>95 % CI (lenient)</th><th>Invalid % (lenient)</th>") == 4
    )  # per group, per mapping, Figure 4, every row
    assert "n/a: no valid reply under that rule" in html
    # foo|bar direct: both replies invalid, so no accuracy and no interval.
    assert (
        "<td>foo|bar</td><td>direct</td><td>2</td><td>n/a</td><td>n/a</td><td>n/a</td>"
        "<td>100.0</td>" in html
    )


def test_a_figure_opened_on_its_own_may_run_nothing(client, researcher, with_humans):
    """The SVG carries dataset and system names from imported files; it got the site's policy
    (scripts from 'self'), not the InFoBench figure's, under which an SVG opened alone runs
    nothing and loads nothing."""
    client.force_login(researcher)
    for fmt in ("svg", "png", "pdf"):
        url = reverse("verbalizer-reports:figure", args=[with_humans.pk, "groups", fmt])
        policy = client.get(url)["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
        assert "script-src" not in policy, policy


def test_answers_waiting_for_a_kind_are_named_with_the_way_to_count_them(
    client, researcher, with_humans
):
    from annotate.models import Annotator

    Annotator.objects.filter(name="p2").update(kind="undecided")  # a new web account
    client.force_login(researcher)
    decide = f'<a href="{reverse("annotators:list")}?kind=undecided">'
    pages = [
        reverse("verbalizer-reports:detail", args=[with_humans.pk]),
        reverse("verbalizer:set-detail", args=[with_humans.pk]),
    ]
    for url in pages:
        html = client.get(url).content.decode()
        assert "2 answers of 1 person whose kind (expert or crowd worker) is not decided" in html
        assert decide in html
    Annotator.objects.filter(name="p2").update(kind="expert")
    for url in pages:
        assert 'id="waiting-for-kind"' not in client.get(url).content.decode()


def test_the_way_to_count_waiting_answers_is_told_as_the_viewers_role_allows(
    client, researcher, admin_user, with_humans
):
    """A researcher was told to "Decide their kind on the Annotators page", where only an admin
    may decide the kind of a person with work outside the researcher's projects and studies."""
    from annotate.models import Annotator

    Annotator.objects.filter(name="p2").update(kind="undecided")
    pages = [
        reverse("verbalizer-reports:detail", args=[with_humans.pk]),
        reverse("verbalizer:set-detail", args=[with_humans.pk]),
    ]
    for user, admin_decides in ((researcher, True), (admin_user, False)):
        client.force_login(user)
        for url in pages:
            html = client.get(url).text
            section = html.split('id="waiting-for-kind"')[1].split("</section>")[0]
            assert ("decided by an admin" in section) is admin_decides, (user, url)
            assert ("Decide their kind" in section) is not admin_decides, (user, url)


def test_the_page_says_a_group_averages_its_mappings_as_its_numbers_do(
    client, researcher, small_set
):
    """A group is the mean of its (dataset, mapping) accuracies: the page said "correct / valid
    replies", which a reader recomputing a group from its answers would not find."""
    from evaluation.verbalizer.report import verbalizer_report

    client.force_login(researcher)
    page = client.get(reverse("verbalizer-reports:detail", args=[small_set.pk]))
    html = page.content.decode()
    assert "a row over several (a group, a condition) is the mean of theirs" in html
    rows = verbalizer_report(evaluation_set=small_set)["rows"]
    unnatural = [
        r["accuracy_lenient"] for r in rows
        if r["group"] == "unnatural" and r["mode"] == "direct" and r["system"] == "m1"
        and r["accuracy_lenient"] is not None
    ]  # fmt: skip
    group = next(
        r for r in page.context["groups"] if r["system"] == "m1" and r["group"] == "unnatural"
    )
    assert group["accuracy_lenient"] == pytest.approx(sum(unnatural) / len(unnatural))
    latex = client.get(reverse("verbalizer-reports:download", args=[small_set.pk, "latex"]))
    assert "a group is the mean of its datasets' and mappings' accuracies" in latex.text


def test_replies_are_filtered_by_selects_of_the_sets_own_values_and_old_links_still_work(
    client, researcher, small_set
):
    """The filters were free text, exact and case-sensitive: "mapping=Golden" found nothing."""
    from annotate.verbalizer.models import ModelAnswer

    client.force_login(researcher)
    url = reverse("verbalizer-reports:replies", args=[small_set.pk])
    page = client.get(url)
    answers = ModelAnswer.objects.filter(prompt__evaluation_set=small_set)
    mappings = sorted({a.prompt.mapping.name for a in answers})
    systems = sorted({a.system.name for a in answers})
    html = page.content.decode()
    assert '<select name="mapping" id="filter-mapping">' in html
    for name in [*mappings, *systems]:
        assert f'<option value="{name}">' in html
    assert '<option value="direct">Direct</option>' in html
    wanted = mappings[0]
    found = client.get(url, {"mapping": wanted.upper()})  # an old link, typed by hand
    assert f'<option value="{wanted}" selected>' in found.content.decode()
    expected = answers.filter(prompt__mapping__name=wanted).count()
    assert expected and len(found.context["shown"]) == expected
    missing = client.get(url, {"system": "nobody"})
    assert '<option value="nobody" selected>nobody</option>' in missing.content.decode()
    assert b"No replies." in missing.content


def test_the_report_page_rounds_percentages_as_its_latex_and_markdown_do():
    from evaluation.templatetags.verbalizer_report import pct, pct_interval
    from evaluation.verbalizer.formats import _pct

    # 0.8125: two datasets' 0.8333 and 0.7917 averaged; Python's "%.1f" made it 81.2.
    for value in (0.8125, 0.0625, 0.285, 0.5, 1.0, 0.0):
        assert pct(value) == _pct(value), value
    assert pct(0.8125) == "81.3"
    assert pct(None) == "n/a" and pct_interval(0.0625, None) == "n/a"
    assert pct_interval(0.0625, 0.8125) == "6.3–81.3"


def test_report_page_shows_figure_3s_numbers_per_mapping(client, researcher, small_set):
    """Figure 3 (accuracy per natural and unnatural mapping, direct) had no table on the page:
    its numbers were in the figure alone (and the API). m1: golden right on both items;
    flipped-golden wrong on item 1, invalid on item 2 (0 % of the valid, 50 % invalid);
    foo|bar is neutral, so not in Figure 3."""
    client.force_login(researcher)
    html = client.get(reverse("verbalizer-reports:detail", args=[small_set.pk])).text
    table = html[html.index('id="per-mapping"') : html.index("Golden vs flipped golden")]
    golden = "<td>m1</td><td>natural</td><td>golden</td><td>2</td><td>100.0</td><td>100.0</td>"
    flipped = (
        "<td>m1</td><td>unnatural</td><td>flipped-golden</td><td>2</td><td>0.0</td><td>0.0</td>"
    )
    assert golden in table and flipped in table
    assert "<td>50.0</td></tr>" in table and "foo|bar" not in table


def test_replies_page_links_the_prompts_they_answer_with_the_same_filters(
    client, researcher, small_set
):
    """A chain-of-thought reply was shown without its instruction, and no link led to it."""
    from django.utils.html import escape

    client.force_login(researcher)
    url = reverse("verbalizer-reports:replies", args=[small_set.pk])
    prompts = reverse("verbalizer:set-prompts", args=[small_set.pk])
    html = client.get(url, {"mapping": "flipped-golden", "mode": "cot", "system": "m1"}).text
    linked = escape(f"{prompts}?mapping=flipped-golden&mode=cot")
    assert f'<a href="{linked}" id="replies-prompts">' in html
    assert f'<a href="{prompts}" id="replies-prompts">' in client.get(url).text
    shown = client.get(prompts, {"mapping": "flipped-golden", "mode": "cot"}).text
    assert "2 prompts match the filters." in shown and "Let&#x27;s think step by step." in shown


def test_the_human_answers_download_counts_with_the_exports(
    client, researcher, with_humans, worker_rates
):
    """Every answer of the set: counted per user with the report exports (EXPORT_RATE); past it
    429 with Retry-After and the way back to the report."""
    worker_rates(exports="1/hour")
    client.force_login(researcher)
    url = reverse("verbalizer-reports:human-answers", args=[with_humans.pk])
    assert client.get(url).status_code == 200
    refused = client.get(url)
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    html = refused.content.decode()
    assert "Too many report exports and label downloads from your account (at most 1/hour)" in html
    assert reverse("verbalizer-reports:detail", args=[with_humans.pk]) in html


def test_the_report_page_shows_kappa_as_its_markdown_and_latex_do(
    client, researcher, with_humans, monkeypatch
):
    """The page rounded kappa halves up (floatformat) and the Markdown and LaTeX tables to even
    (Python's format): a kappa of 1/16 read 0.063 on the page and 0.062 in the paper's table."""
    import evaluation.verbalizer.views as views
    from evaluation.verbalizer.formats import report_as
    from evaluation.verbalizer.report import verbalizer_report

    report = verbalizer_report(evaluation_set=with_humans)
    for found in report["agreement"]:
        found.update(kappa=0.0625, ci_low=-0.0625, ci_high=0.8125)
    monkeypatch.setattr(views, "verbalizer_report_cached", lambda **kwargs: report)
    client.force_login(researcher)
    html = client.get(reverse("verbalizer-reports:detail", args=[with_humans.pk])).text
    assert "<td>0.063</td><td>-0.063 to 0.813</td>" in html
    assert "| 0.063 | -0.063 to 0.813 |" in report_as(report, "md", "agreement")
    assert "& 0.063 & [-0.063, 0.813] &" in report_as(report, "latex", "agreement")


def test_a_tied_majority_is_said_to_count_as_invalid(client, researcher, with_humans):
    """Two people split on a prompt: its -majority row read "Invalid % 50.0" while the page said
    only that a majority is the word more than half chose, and that Invalid % is the share of
    replies the rule cannot read; a researcher saw invalid replies nobody gave."""
    from annotate.models import Annotator

    Annotator.objects.filter(name="p2").update(kind="undecided")  # item 2: one each way
    client.force_login(researcher)
    html = client.get(reverse("verbalizer-reports:detail", args=[with_humans.pk])).content.decode()
    assert (
        "<td>human-majority</td><td>SST-2</td><td>unnatural</td><td>flipped-golden</td>"
        "<td>direct</td><td>2</td><td>100.0</td><td>100.0</td><td>n/a</td><td>50.0</td>"
    ) in html  # one item valid: no interval (it read 100.0–100.0, one item resampled)
    assert "a tie, has no majority word and counts under Invalid %" in html
