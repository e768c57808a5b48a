"""Humans and models on the same prompts: every model is scored a second time on exactly the
prompts people answered, beside the people, with numbers checked by hand."""

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotate.models import Annotator, System
from annotate.verbalizer.models import HumanAnswer, HumanStudy, ModelAnswer, Prompt, SystemRun
from annotate.verbalizer.services.sets import evaluation_set_create
from evaluation.verbalizer.formats import report_as
from evaluation.verbalizer.report import verbalizer_report
from tests.annotate.verbalizer.helpers import fill

pytestmark = pytest.mark.django_db

TABLES = ("rows", "groups", "mappings", "flipped", "flipped_by_dataset")


def row(rows, **match):
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def prompt(s, dataset, mapping, position):
    return Prompt.objects.get(
        evaluation_set=s, item__dataset__name=dataset, mapping__name=mapping,
        mode="direct", item__position=position,
    )  # fmt: skip


def run(s, name, size):
    return SystemRun.objects.create(
        evaluation_set=s, system=System.objects.create(name=name), endpoint_name="stub",
        model_size_b=size,
    )  # fmt: skip


def say(system_run, p, reply):
    ModelAnswer.objects.create(prompt=p, system=system_run.system, run=system_run, reply=reply)


@pytest.fixture
def overlap(db):
    """SST-2 items 1-3 (positive, negative, positive) and D2 items 1-2 (positive, negative);
    mappings golden, 1|0 (natural) and flipped-golden (unnatural); direct only: 15 prompts.

    m1 (7B) answers all 15 with the expected word, except SST-2 golden item 3 ("negative").
    m2 (13B) answers D2's 6 prompts only, all right. m3 (size unknown) answers SST-2 golden
    item 1 "positive" (right) and item 2 "maybe" (invalid).
    Study S publishes SST-2 golden items 1-3 and SST-2 flipped-golden item 1 (4 prompts); two
    experts answer the three golden ones: p0 all right, p1 right on items 1 and 2 and
    "negative" on item 3 (wrong). Nobody answered the flipped-golden prompt yet.
    """
    fill("SST-2", [True, False, True])
    fill("D2", [True, False])
    s = evaluation_set_create(
        name="overlap", datasets=["SST-2", "D2"], items=3, seed=1,
        mappings="golden,1|0,flipped-golden",
    ).evaluation_set  # fmt: skip
    m1, m2, m3 = run(s, "m1", 7), run(s, "m2", 13), run(s, "m3", None)
    for p in Prompt.objects.filter(evaluation_set=s).select_related("item__dataset"):
        say(m1, p, p.expected_word)
        if p.item.dataset.name == "D2":
            say(m2, p, p.expected_word)
    ModelAnswer.objects.filter(system=m1.system, prompt=prompt(s, "SST-2", "golden", 3)).update(
        reply="negative"
    )
    say(m3, prompt(s, "SST-2", "golden", 1), "positive")
    say(m3, prompt(s, "SST-2", "golden", 2), "maybe")
    study = HumanStudy.objects.create(name="S", evaluation_set=s, answers_per_prompt=2)
    golden = [prompt(s, "SST-2", "golden", k) for k in (1, 2, 3)]
    study.prompts.set([*golden, prompt(s, "SST-2", "flipped-golden", 1)])
    for name, words in (("p0", ["positive", "negative", "positive"]),
                        ("p1", ["positive", "negative", "negative"])):  # fmt: skip
        person = Annotator.objects.create(name=name, kind="expert")
        for p, word in zip(golden, words, strict=True):
            HumanAnswer.objects.create(study=study, prompt=p, annotator=person, word=word)
    return s


def test_models_on_the_prompts_people_answered_by_hand(overlap):
    report = verbalizer_report(evaluation_set=overlap)
    groups = report["groups"]
    # m1 on the 3 study prompts people answered: right on items 1 and 2, wrong on item 3.
    same = row(groups, system="m1", prompts="people", group="natural")
    assert (same["n"], same["accuracy_lenient"], same["invalid"]) == (3, pytest.approx(2 / 3), 0)
    # Its own row averages golden and 1|0 on both datasets, as the paper averages over datasets
    # and verbalizers: SST-2 golden 2/3, SST-2 1|0 3/3, D2 golden 2/2, D2 1|0 2/2 (pooled, the
    # smaller D2 would weigh less: 9 right of 10).
    own = row(groups, system="m1", prompts="set", group="natural")
    assert (own["n"], own["accuracy_lenient"]) == (10, pytest.approx((2 / 3 + 1 + 1 + 1) / 4))
    # The flipped-golden study prompt nobody answered is no part of the people's prompts.
    assert not [r for r in groups if r["prompts"] == "people" and r["group"] == "unnatural"]
    assert row(groups, system="m1", prompts="set", group="unnatural")["accuracy_lenient"] == 1.0
    # m3 answered 2 of the 3: one right, one invalid.
    m3 = row(groups, system="m3", prompts="people", group="natural")
    assert (m3["n"], m3["accuracy_lenient"], m3["invalid"]) == (2, 1.0, 0.5)
    # m2 answered none of them: no row on the people's prompts.
    assert not [r for r in groups if r["system"] == "m2" and r["prompts"] == "people"]
    # The people: 5 of 6 answers right; majorities right on items 1 and 2, a tie on item 3.
    human = row(groups, system="human", group="natural")
    assert (human["prompts"], human["n"], human["accuracy_lenient"]) == ("people", 6, 5 / 6)
    majority = row(groups, system="human-majority", group="natural")
    assert (majority["n"], majority["accuracy_lenient"], majority["invalid"]) == (3, 1.0, 1 / 3)


def test_same_prompts_in_every_table_that_puts_people_beside_models(overlap):
    report = verbalizer_report(evaluation_set=overlap)
    fine = row(report["rows"], system="m1", prompts="people", mapping="golden")
    assert (fine["dataset"], fine["mode"], fine["n"]) == ("SST-2", "direct", 3)
    assert fine["accuracy_strict"] == fine["accuracy_lenient"] == pytest.approx(2 / 3)
    assert row(report["mappings"], system="m1", prompts="people")["mapping"] == "golden"
    condition = row(report["flipped"], system="m1", prompts="people")
    assert (condition["condition"], condition["n"]) == ("natural golden, direct", 3)
    assert condition["accuracy_lenient"] == pytest.approx(2 / 3)
    by_dataset = row(report["flipped_by_dataset"], system="m1", prompts="people")
    assert (by_dataset["dataset"], by_dataset["n"]) == ("SST-2", 3)
    # Each table: every model on the set's prompts, then the models on the people's prompts
    # and the people (smallest model first, people last).
    order = list(dict.fromkeys((r["system"], r["prompts"]) for r in report["groups"]))
    assert order == [
        ("m1", "set"), ("m2", "set"), ("m3", "set"),
        ("m1", "people"), ("m3", "people"), ("human", "people"), ("human-majority", "people"),
    ]  # fmt: skip


def test_same_prompt_rows_share_the_models_scoring_and_bootstrap(overlap):
    """m3 answered only study prompts, so its row on the people's prompts and its own row hold
    the same answers: the same numbers and, from the same resamples, the same interval."""
    report = verbalizer_report(evaluation_set=overlap)
    for table in TABLES:
        own = [r for r in report[table] if (r["system"], r["prompts"]) == ("m3", "set")]
        same = [r for r in report[table] if (r["system"], r["prompts"]) == ("m3", "people")]
        assert [{**r, "prompts": "people"} for r in own] == same, table
    m1 = row(report["groups"], system="m1", prompts="people", group="natural")
    low, high = m1["ci_lenient"]
    assert 0.0 <= low <= 2 / 3 <= high <= 1.0


def test_full_set_rows_are_as_without_people(overlap):
    """People add rows; the models' own rows keep every number, interval included."""
    with_people = verbalizer_report(evaluation_set=overlap)
    HumanAnswer.objects.all().delete()
    without = verbalizer_report(evaluation_set=overlap)
    assert without["slices"] == []
    for table in TABLES:
        own = [r for r in with_people[table] if r["prompts"] == "set"]
        assert own == without[table], table
        assert {r["prompts"] for r in without[table]} == {"set"}


def test_the_slice_is_described_and_says_which_models_answered_it(overlap):
    (found,) = verbalizer_report(evaluation_set=overlap)["slices"]
    assert found["people"] == ["human", "human-majority"]
    assert (found["studies"], found["prompt_count"], found["published_count"]) == (["S"], 3, 4)
    assert (found["datasets"], found["mappings"], found["modes"]) == (
        ["SST-2"], ["golden"], ["direct"],
    )  # fmt: skip
    assert (found["items"], found["set_items"], found["set_prompt_count"]) == (
        {"SST-2": 3}, {"SST-2": 3}, 15,
    )  # fmt: skip
    assert found["models"] == {"m1": 3, "m2": 0, "m3": 2}
    assert found["note"] == (
        "The rows human and human-majority rest on the 3 prompts people answered in study "
        "\u201cS\u201d (of the 4 it publishes): SST-2 (3 of the set's 3 items); mapping golden; mode direct. "
        "Rows \u201cmodel, on people's prompts\u201d score each model on exactly these prompts, "
        "with the same rules and bootstrap as every row; the other model rows pool every prompt "
        "of the set's 15 that the model answered. m1 answered all 3; m2 answered none; "
        "m3 answered 2 of them."
    )


def test_two_studies_are_named_as_studies(overlap):
    """People of two studies on the same set: the sentence names both, in plain English."""
    second = HumanStudy.objects.create(name="T", evaluation_set=overlap, answers_per_prompt=1)
    item_2 = prompt(overlap, "SST-2", "golden", 2)
    second.prompts.set([item_2])
    HumanAnswer.objects.create(
        study=second,
        prompt=item_2,
        annotator=Annotator.objects.create(name="p2", kind="expert"),
        word="negative",
    )
    (found,) = verbalizer_report(evaluation_set=overlap)["slices"]
    assert found["studies"] == ["S", "T"]
    assert "people answered in studies \u201cS\u201d and \u201cT\u201d" in found["note"]


def test_no_model_on_the_peoples_prompts_is_said(overlap):
    ModelAnswer.objects.filter(prompt__item__dataset__name="SST-2").delete()
    report = verbalizer_report(evaluation_set=overlap)
    (found,) = report["slices"]
    assert found["models"] == {"m1": 0, "m2": 0}
    assert found["note"].endswith(
        "No model answered these prompts, so no model row stands beside these people on them."
    )
    assert {r["system"] for r in report["groups"] if r["prompts"] == "people"} == {
        "human", "human-majority",
    }  # fmt: skip


def test_crowd_workers_on_other_prompts_get_their_own_slice(overlap):
    """In-house annotators answered the three golden prompts, a crowd worker only item 1: the
    in-house rows share everyone's prompts, the crowd's rows get m1 on item 1 alone."""
    worker = Annotator.objects.create(name="w", kind="crowd", platform="selfhosted")
    study = HumanStudy.objects.get(name="S")
    HumanAnswer.objects.create(
        study=study, prompt=prompt(overlap, "SST-2", "golden", 1), annotator=worker,
        word="positive",
    )  # fmt: skip
    report = verbalizer_report(evaluation_set=overlap)
    people, crowd = report["slices"]
    assert people["people"] == [
        "human",
        "human-majority",
        "human-inhouse",
        "human-inhouse-majority",
    ]
    assert (crowd["prompts"], crowd["people"]) == ("crowd", ["human-crowd", "human-crowd-majority"])
    assert (crowd["prompt_count"], crowd["models"]) == (1, {"m1": 1, "m2": 0, "m3": 1})
    assert crowd["note"].startswith(
        "The rows human-crowd and human-crowd-majority rest on the 1 prompt crowd workers "
        "answered in study \u201cS\u201d (of the 4 it publishes)"
    )
    m1 = row(report["groups"], system="m1", prompts="crowd")
    assert (m1["n"], m1["accuracy_lenient"]) == (1, 1.0)
    assert row(report["groups"], system="human-crowd")["prompts"] == "crowd"
    assert row(report["groups"], system="human-inhouse")["prompts"] == "people"
    # Everyone's prompts are still the three golden ones (the worker's is one of them).
    assert row(report["groups"], system="human")["n"] == 7


def test_every_format_carries_the_same_prompt_rows_and_the_sentence(overlap, capsys):
    report = verbalizer_report(evaluation_set=overlap)
    (found,) = report["slices"]
    table = list(csv.DictReader(io.StringIO(report_as(report, "csv"))))
    same = [r for r in table if (r["system"], r["prompts"]) == ("m1", "people")]
    assert [(r["mapping"], r["n"], r["accuracy_lenient"]) for r in same] == [
        ("golden", "3", repr(2 / 3))
    ]
    assert {r["prompts"] for r in table if r["system"] == "m2"} == {"set"}
    rows = json.loads(report_as(report, "json"))
    assert row(rows, system="m1", prompts="people")["accuracy_lenient"] == pytest.approx(2 / 3)
    md = report_as(report, "md")
    assert "| m1, on people's prompts | SST-2 | natural | golden | direct | 3 | 66.7 | 66.7 |" in md
    assert "| m1 | SST-2 | natural | golden | direct | 3 | 66.7 | 66.7 |" in md
    assert found["note"] in md
    latex = report_as(report, "latex")
    # "--": never asked (the set has no neutral prompt; people answered golden ones only).
    assert "m1 & 91.7 & -- & 100.0 & 0.0 & -- & 0.0 \\\\" in latex  # (2/3 + 1 + 1 + 1) / 4
    assert "\\midrule\nm1, on people's prompts & 66.7 & -- & -- & 0.0 & -- & -- \\\\" in latex
    # The majority's 100.0 rests on two of its three prompts: the third is a tie.
    assert "human-majority & 100.0 & -- & -- & 33.3 & -- & -- \\\\" in latex
    assert "``model, on people's prompts''" in latex and "of the 4 it publishes" in latex
    slices = list(csv.DictReader(io.StringIO(report_as(report, "csv", "slices"))))
    assert [(s["prompts"], s["people"], s["items"], s["models"]) for s in slices] == [
        ("people", "human; human-majority", "SST-2: 3 of 3", "m1: 3; m2: 0; m3: 2")
    ]
    assert slices[0]["note"] == found["note"]
    assert json.loads(report_as(report, "json", "slices")) == report["slices"]
    assert found["note"] in report_as(report, "md", "slices")
    assert "\\paragraph{People's prompts}" in report_as(report, "latex", "slices")
    call_command("verbalizer_report", "--set", "overlap", "--table", "slices", "--format", "csv")
    assert capsys.readouterr().out.splitlines()[0].startswith("prompts,people,studies")


def test_a_set_without_people_says_so_in_the_slices_table(overlap):
    HumanAnswer.objects.all().delete()
    report = verbalizer_report(evaluation_set=overlap)
    assert report_as(report, "csv", "slices").splitlines() == [
        "prompts,people,studies,prompt_count,published_count,set_prompt_count,datasets,items,"
        "mappings,modes,models,note"
    ]
    assert "No person's answer counts yet" in report_as(report, "md", "slices")
    assert "No person's answer counts yet" not in report_as(report, "md")


@pytest.mark.parametrize("name", ["groups", "mappings", "flipped", "flipped_by_dataset"])
def test_every_figure_draws_the_models_on_the_peoples_prompts(overlap, name):
    from evaluation.verbalizer.figures import render_figure

    svg = render_figure(verbalizer_report(evaluation_set=overlap), name, "svg").decode()
    assert "m1," in svg and "on people" in svg and "human-majority" in svg


def test_page_api_and_download_show_the_same_prompts(client, researcher, overlap):
    client.force_login(researcher)
    html = client.get(reverse("verbalizer-reports:detail", args=[overlap.pk])).content.decode()
    assert "<td>m1, on people&#x27;s prompts</td><td>natural</td><td>3</td><td>66.7</td>" in html
    assert "On the prompts people answered: models beside them on the same prompts" in html
    assert "Every prompt of the set each model answered" in html
    # under the figures, the groups, the mappings, Figure 4 and every row
    assert html.count("rest on the 3 prompts people answered in study \u201cS\u201d") == 5
    api = client.get(reverse("api-verbalizer-report", args=[overlap.pk])).json()
    assert api["slices"][0]["models"] == {"m1": 3, "m2": 0, "m3": 2}
    assert row(api["groups"], system="m1", prompts="people")["ci_lenient_low"] is not None
    download = client.get(reverse("verbalizer-reports:slices-download", args=[overlap.pk, "md"]))
    assert download.status_code == 200 and "study \u201cS\u201d" in download.text


def test_a_study_given_more_prompts_is_a_new_report(overlap):
    """The sentence says how many prompts the studies publish, so the cached report follows."""
    from evaluation.verbalizer.report import verbalizer_report_cached

    def published():
        return verbalizer_report_cached(evaluation_set=overlap)["slices"][0]["published_count"]

    assert published() == 4
    HumanStudy.objects.get(name="S").prompts.add(prompt(overlap, "SST-2", "1|0", 1))
    assert published() == 5


def test_the_report_page_reads_a_fixed_number_of_queries(
    client, researcher, overlap, django_assert_max_num_queries
):
    """More models, people and studies cost no more queries: the same prompts are computed from
    the rows the report reads anyway, plus one read of the studies' prompts."""
    from django.core.cache import cache

    client.force_login(researcher)
    url = reverse("verbalizer-reports:detail", args=[overlap.pk])
    # session, user, roles, the set, six for the cache key (the last: the names it shows), the
    # prompts, the model answers, the counted people's answers, sizes, mappings, datasets, the
    # studies' prompts, navigation, the answers waiting for their people's kind; and on the
    # cache's miss the six of the key again, read in the snapshot of the report's reads (the
    # report is stored under the key of what it read), and the two ends of that snapshot and
    # of the report's own block in it (here savepoints in the test's transaction)
    with django_assert_max_num_queries(29) as first:
        assert client.get(url).status_code == 200
    more = run(overlap, "m4", 70)
    for p in Prompt.objects.filter(evaluation_set=overlap):
        say(more, p, "positive")
    other = HumanStudy.objects.create(name="S2", evaluation_set=overlap)
    other.prompts.set(Prompt.objects.filter(evaluation_set=overlap, mapping__name="1|0"))
    person = Annotator.objects.create(name="p2", kind="expert")
    for p in other.prompts.all():
        HumanAnswer.objects.create(study=other, prompt=p, annotator=person, word="1")
    cache.clear()
    with django_assert_max_num_queries(len(first.captured_queries)):
        assert client.get(url).status_code == 200
