import json
import re

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotate.revision.models import Rerating, Study, Turn
from evaluation.revision.formats import table_notes
from evaluation.revision.judges import judge_run_create, judge_run_execute
from evaluation.revision.models import RevisionJudgeRun, RevisionPrediction
from evaluation.revision.reports import revision_report_build
from tests.evaluation.revision.sample import sample_study
from tests.factories import UserFactory
from tests.latex import assert_latex_compiles, needs_pdflatex

pytestmark = pytest.mark.django_db
approx = pytest.approx


def by(rows, **keys):
    return next(r for r in rows if all(r[k] == v for k, v in keys.items()))


def test_table2_by_hand(tmp_path):
    report = revision_report_build(study=sample_study(tmp_path), n_resamples=10)
    gpt, llama = report["table2"]
    assert gpt == approx(
        {
            "system": "gpt-4",
            "sessions": 2,
            "turns": 3,
            "edited": 1,
            "turns_per_session": 1.5,
            "information_seeking": 1 / 3,
            "stylistic": 2 / 3,
        }
    )
    assert llama == approx(
        {
            "system": "llama",
            "sessions": 1,
            "turns": 3,
            "edited": 1,
            "turns_per_session": 3.0,
            "information_seeking": 2 / 3,
            "stylistic": 1 / 3,
        }
    )


def test_table2_counts_a_session_ended_before_any_turn(tmp_path):
    """An annotator satisfied with the initial answer finishes a session of no turns: it is a
    session (the export writes it), so gpt-4 has 3 sessions of 3 turns, 1.0 a session (it showed
    2 sessions and 1.5 turns a session, counting only sessions that had a rated turn)."""
    study = sample_study(tmp_path)
    path = tmp_path / "none.jsonl"
    line = {"original_question": "Q2?", "model_name": "gpt-4", "initial_answer": "fine"}
    path.write_text(json.dumps({**line, "interaction": []}) + "\n")
    call_command("import_sessions", str(path), "--study", study.name)
    gpt = revision_report_build(study=study, n_resamples=10)["table2"][0]
    assert (gpt["system"], gpt["sessions"], gpt["turns"]) == ("gpt-4", 3, 3)
    assert gpt["turns_per_session"] == approx(1.0)


def test_table2_says_how_many_sessions_ended_before_any_turn_and_what_they_do(tmp_path, client):
    """Only docs/revision.md said that a session ended "I am satisfied" at once counts as a
    session of 0 turns: the page showed gpt-4's 1.0 turns per session with nothing to say why."""
    from django.urls import reverse

    from annotate.roles import RESEARCHER
    from evaluation.revision.formats import revision_latex, revision_markdown

    study = sample_study(tmp_path)
    before = revision_report_build(study=study, n_resamples=10)
    assert before["sessions_without_turns"] == {}
    assert not any("before any rated turn" in note for note in table_notes(before, "table2"))
    path = tmp_path / "none.jsonl"
    line = {"original_question": "Q2?", "model_name": "gpt-4", "initial_answer": "fine"}
    path.write_text(json.dumps({**line, "interaction": []}) + "\n")
    call_command("import_sessions", str(path), "--study", study.name)
    report = revision_report_build(study=study, n_resamples=10)
    assert report["sessions_without_turns"] == {"gpt-4": 1}
    note = (
        "1 of the 4 finished sessions (gpt-4: 1) ended (“I am satisfied”) before any rated "
        "turn: each counts as a session of 0 turns in Sessions and Turns per session, which it "
        "lowers."
    )
    assert note in table_notes(report, "table2") and note in revision_markdown(report)
    assert "before any rated turn" in revision_latex(report)
    client.force_login(UserFactory(roles=[RESEARCHER]))
    page = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert note in page.split('id="t-table2"')[1].split("</section>")[0]


def test_figure2_by_hand(tmp_path):
    report = revision_report_build(study=sample_study(tmp_path), n_resamples=10)
    rows = report["figure2_ratings"]
    assert by(rows, system="gpt-4", instruction_type="stylistic") == approx(
        {
            "system": "gpt-4",
            "instruction_type": "stylistic",
            "turns": 2,
            "good": 0.0,
            "neutral": 0.5,
            "bad": 0.5,
        }
    )
    assert by(rows, system="gpt-4", instruction_type="information-seeking")["good"] == 1.0
    assert by(rows, system="llama", instruction_type="information-seeking") == approx(
        {
            "system": "llama",
            "instruction_type": "information-seeking",
            "turns": 2,
            "good": 0.5,
            "neutral": 0.0,
            "bad": 0.5,
        }
    )
    assert by(rows, system="llama", instruction_type="all")["neutral"] == approx(1 / 3)
    positions = report["figure2_positions"]
    assert [(p["position"], p["turns"]) for p in positions] == [(1, 3), (2, 2), (3, 1)]
    assert positions[0]["information_seeking"] == approx(2 / 3)
    assert positions[1]["stylistic"] == approx(0.5) and positions[2]["stylistic"] == 1.0


def test_table3_and_4_from_human_labels_then_with_the_classifier(tmp_path):
    study = sample_study(tmp_path)
    report = revision_report_build(study=study, n_resamples=10)
    rows = report["table3"]["rows"]
    more = by(rows, category="asking for more information")
    assert more == approx(
        {
            "category": "asking for more information",
            "turns": 2,
            "share": 2 / 4,  # of the 4 categorised turns (2 are not)
            "information_seeking": 1.0,
            "stylistic": 0.0,
            "good:gpt-4": 1.0,
            "good:llama": 0.0,
        }
    )
    assert "unlabelled" not in [row["category"] for row in rows]
    assert report["table3"]["unlabelled"] == 2
    assert by(rows, category="condense")["good:llama"] is None
    failed = report["table4"]["rows"]
    # Of the 4 neutral or bad turns only 1 has an error category: the shares are of it alone
    # (llama has no categorised failed turn: undefined, not 0), the 3 others counted apart.
    assert failed == [
        approx(
            {
                "category": "instruction is ignored",
                "turns": 1,
                "share": 1.0,
                "share:gpt-4": 1.0,
                "share:llama": None,
            }
        )
    ]
    assert report["table4"]["unlabelled"] == 3

    now = timezone.now()
    for task in ("instruction-category", "error-category"):
        run = judge_run_create(study=study, task=task, now=now)
        assert judge_run_execute(run_id=run.pk).status == "done"
    report = revision_report_build(study=study, n_resamples=10)
    table3 = report["table3"]
    # The fake classifier calls "Give results from all papers." expand coverage: 3 of 4 agree.
    assert table3["agreement"]["compared"] == 4
    assert table3["agreement"]["agreement"] == 0.75
    assert table3["sources"] == {"human": 4, "classifier": 2}
    more = by(table3["rows"], category="asking for more information")
    # "Tell me more." (llama, good) joins; the human label of turn 4 wins over the classifier.
    assert (more["turns"], more["good:llama"]) == (3, 0.5)
    assert by(table3["rows"], category="reorganize")["turns"] == 1
    assert report["table4"]["agreement"]["compared"] == 1
    assert RevisionPrediction.objects.filter(run__task="error-category").count() == 4


def test_table5_by_hand(tmp_path):
    study = sample_study(tmp_path)
    ids = list(Turn.objects.order_by("id").values_list("id", flat=True))
    run = RevisionJudgeRun.objects.create(
        study=study,
        task="rating-judge",
        mode="zero-shot",
        prompt_version="x",
        seed=4,
        split={"train": ids[:4], "dev": [], "test": ids[4:]},
        status="done",
        created_at=timezone.now(),
        finished_at=timezone.now(),
        endpoint_name="judge-a",
    )
    for turn_id in ids[4:]:  # test: "Tell me more." (good), "Move ..." (neutral)
        RevisionPrediction.objects.create(run=run, turn_id=turn_id, label="good")
    other, third = UserFactory(kind="expert"), UserFactory(kind="expert")
    now = timezone.now()
    Rerating.objects.create(
        turn_id=ids[0], annotator=other, rating="bad", status="done", created_at=now
    )
    Rerating.objects.create(
        turn_id=ids[5], annotator=third, rating="neutral", status="done", created_at=now
    )
    report = revision_report_build(study=study, n_resamples=200)
    rows = report["table5"]["rows"]
    judge = by(rows, model="judge-a")
    # truth [good, not], predicted [good, good]: TP 1, FP 1
    assert (judge["accuracy"], judge["precision"], judge["recall"]) == (0.5, 0.5, 1.0)
    assert judge["f1"] == approx(2 / 3) and judge["predicted_good"] == 1.0
    assert judge["accuracy_ci_low"] <= 0.5 <= judge["accuracy_ci_high"]
    # training split: 1 good of 4, so Majority says "not good" everywhere: TP 0, FP 0, FN 1,
    # TN 1, so precision is 0/0, undefined (None), recall 0/1 and F1 0/(0+0+1) measured zeros
    majority = by(rows, model="Majority")
    assert (majority["accuracy"], majority["recall"], majority["predicted_bad"]) == (0.5, 0.0, 1.0)
    assert (majority["precision"], majority["f1"]) == (None, 0.0)
    assert (majority["precision_ci_low"], majority["precision_ci_high"]) == (None, None)
    # Not applicable to a baseline nor to people: None, as the Human row ("–" when shown).
    assert {(r["model"], r["mode"], r["shots"]) for r in rows if r["model"] != "judge-a"} == {
        ("Majority", None, None),
        ("Random", None, None),
        ("Human", None, None),
    }
    human = by(rows, model="Human")
    # originals [good, neutral] vs re-ratings [bad, neutral]: binary [T, F] vs [F, F]
    assert (human["n"], human["accuracy"], human["recall"]) == (2, 0.5, 0.0)
    assert human["three_way_agreement"] == 0.5
    assert report["table5"]["splits"] == [
        {"split": 1, "seed": 4, "runs": [run.pk], "turns": 6, "train": 4, "dev": 0, "test": 2}
    ]


def test_an_undefined_table5_figure_is_null_empty_or_a_dash_never_zero_or_nan(
    tmp_path, client, capsys
):
    """The Majority baseline predicting no good turn showed precision 0.00 (0/0) on the page
    and in every format; a researcher copying the table would publish a wrong zero."""
    from django.urls import reverse

    from annotate.roles import RESEARCHER
    from evaluation.revision.formats import UNDEFINED_NOTE

    study = sample_study(tmp_path)
    ids = list(Turn.objects.order_by("id").values_list("id", flat=True))
    # Training turns 1 good of 4: Majority predicts "not good" for the 2 test turns.
    RevisionJudgeRun.objects.create(
        study=study, task="rating-judge", mode="zero-shot", prompt_version="x", seed=4,
        split={"train": ids[:4], "dev": [], "test": ids[4:]}, status="done",
        created_at=timezone.now(), finished_at=timezone.now(), endpoint_name="judge-a",
    )  # fmt: skip

    def printed(fmt):
        call_command("revision_report", "--study", study.name, "--format", fmt)
        return capsys.readouterr().out

    rows = json.loads(printed("json"))["table5"]["rows"]
    majority = by(rows, model="Majority")
    undefined = ("precision", "precision_ci_low", "precision_ci_high")
    assert [majority[name] for name in undefined] == [None] * 3
    # 0 of the 1 good test turn found: recall and F1 (0 / (0 + 0 + 1)) are measured zeros
    assert (majority["recall"], majority["f1"]) == (0.0, 0.0)
    csv_text = printed("csv")
    header, line = next(
        (lines[0], lines[1]) for part in csv_text.split("# table5\r\n")[1:]
        for lines in [part.split("\r\n")]
    )  # fmt: skip
    cells = dict(zip(header.split(","), line.split(","), strict=True))
    assert cells["model"] == "Majority" and cells["precision"] == ""
    assert cells["recall"] == cells["f1"] == "0.0"
    markdown, latex = printed("md"), printed("latex")
    for text in (markdown, latex):
        assert UNDEFINED_NOTE.split(":")[0] in text and "nan" not in text.lower()
    # Accuracy, precision, recall, F1, predicted good/bad; a figure undefined has no interval,
    # nor recall and F1 here, which one turn alone takes part in (the good one): they read
    # [0.00, 0.00], every resample the same turn.
    row = "| Majority | – | – | 2 | 0.50 [0.00, 1.00] | – | 0.00 | 0.00 |"
    assert row in markdown
    client.force_login(UserFactory(roles=[RESEARCHER]))
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    table5 = next(table for table in page.context["tables"] if table["name"] == "table5")
    shown = dict(zip(table5["columns"], table5["rows"][0], strict=True))
    assert shown["Precision"] == {"text": "–", "interval": ""}
    assert shown["F1"]["text"] == "0.00"
    assert UNDEFINED_NOTE in page.content.decode() and "nan" not in page.content.decode()


def test_table5_human_row_leaves_out_a_rerating_by_the_sessions_own_annotator(tmp_path):
    """Re-ratings sent (under an older rule) to the annotator of the turn's own session counted
    in the Human row: a second rating by the first rater is no agreement between two people."""
    from annotate.revision.models import RevisionSession

    study = sample_study(tmp_path)
    ids = list(Turn.objects.order_by("id").values_list("id", flat=True))
    ivy, ann, other = (
        UserFactory(username=name, kind="expert") for name in ("ivy", "ann", "other")
    )
    first, _, third = RevisionSession.objects.order_by("id")
    first.extra = {**first.extra, "annotator": "ivy"}  # imported: its line names ivy
    first.save(update_fields=["extra"])
    third.annotator = ann  # done in the app by ann
    third.save(update_fields=["annotator"])
    now = timezone.now()
    for turn_id, annotator, rating in (
        (ids[0], ivy, "bad"),  # good, by ivy of her own imported session: left out
        (ids[1], other, "bad"),  # bad -> bad
        (ids[2], ivy, "neutral"),  # neutral -> neutral: ivy did not do this session
        (ids[4], ann, "bad"),  # good, by ann of her own session: left out
        (ids[5], other, "good"),  # neutral -> good
    ):
        Rerating.objects.create(turn_id=turn_id, annotator=annotator, rating=rating,
                                status="done", created_at=now)  # fmt: skip
    human = by(revision_report_build(study=study, n_resamples=10)["table5"]["rows"], model="Human")
    # originals [bad, neutral, neutral] vs re-ratings [bad, neutral, good]:
    # binary (good?) [F, F, F] vs [F, F, T]: 2 of 3 agree, 1 of 3 predicted good; 3-way 2 of 3.
    assert human["n"] == 3
    assert human["accuracy"] == approx(2 / 3) and human["predicted_good"] == approx(1 / 3)
    assert human["three_way_agreement"] == approx(2 / 3)


def test_table5_split_sizes_count_only_turns_still_rated(tmp_path):
    """A split stored with a run names turns that may since have been deleted or unrated; its
    train and test sizes counted only the rated ones, its dev size all of them."""
    study = sample_study(tmp_path)
    ids = list(Turn.objects.order_by("id").values_list("id", flat=True))
    RevisionJudgeRun.objects.create(
        study=study, task="rating-judge", mode="zero-shot", prompt_version="x", seed=1,
        split={"train": ids[:3] + [10**9], "dev": [ids[3], 10**9 + 1], "test": ids[4:]},
        status="done", created_at=timezone.now(), finished_at=timezone.now(),
    )  # fmt: skip
    report = revision_report_build(study=study, n_resamples=10)
    (split,) = report["table5"]["splits"]
    assert (split["turns"], split["train"], split["dev"], split["test"]) == (6, 3, 1, 2)


def test_rating_judge_run_stores_its_seeded_split_and_labels_the_test_turns(tmp_path):
    study = sample_study(tmp_path)
    now = timezone.now()
    run = judge_run_create(
        study=study, task="rating-judge", mode="k-shot", shots=2, seed=1, now=now
    )
    again = judge_run_create(study=study, task="rating-judge", mode="zero-shot", seed=1, now=now)
    assert run.split == again.split
    assert sorted(run.split["train"] + run.split["dev"] + run.split["test"]) == sorted(
        Turn.objects.values_list("id", flat=True)
    )
    run = judge_run_execute(run_id=run.pk)
    assert run.status == "done"
    assert set(run.predictions.values_list("label", flat=True)) <= {"good", "bad"}
    assert run.predictions.count() == len(run.split["test"])


def test_revision_report_command_prints_every_format(tmp_path, capsys):
    sample_study(tmp_path, name="demo-kiwi")
    call_command("revision_report", "--study", "demo-kiwi", "--format", "json")
    report = json.loads(capsys.readouterr().out)
    assert report["table2"][0]["system"] == "gpt-4" and report["table2"][0]["turns"] == 3
    call_command("revision_report", "--study", "demo-kiwi", "--format", "md")
    assert "| gpt-4 | 2 | 3 | 1 | 1.50 | 33 | 67 |" in capsys.readouterr().out
    call_command("revision_report", "--study", "demo-kiwi", "--format", "csv")
    assert "# table2\r\nsystem,sessions,turns" in capsys.readouterr().out
    call_command("revision_report", "--study", "demo-kiwi", "--format", "latex")
    assert "\\begin{tabular}" in capsys.readouterr().out


def test_exported_percentages_round_halves_up_as_the_page_does():
    """1 turn in 8 is 12.5 %: the paper's whole percentages say 13 (Python's formatting said
    12), and shares of a row may then add to 101, which the Markdown says."""
    from evaluation.revision.formats import TABLES, revision_latex, revision_markdown
    from evaluation.revision.views import _cell

    row = {"system": "a", "turns_per_session": 1.125, "information_seeking": 1 / 8}
    report = {"study": "s", **{table: [] for table in TABLES}}
    report["table2"] = [{**row, "stylistic": 7 / 8}]
    assert "a & 1.13 & 13 & 88 \\\\" in revision_latex(report)
    header = "System & Turns per session & \\% information-seeking & \\% stylistic \\\\"
    assert header in revision_latex(report)
    markdown = revision_markdown(report)
    assert "| System | Turns per session | % information-seeking | % stylistic |" in markdown
    assert "| a | 1.13 | 13 | 88 |" in markdown and "need not add up to 100" in markdown
    cells = [_cell({"f1": value}, "f1")["text"] for value in (0.125, -0.125)]
    assert cells == ["0.13", "-0.13"]  # the report page's cells
    # 57 of 200 is 28.5 %: scaled in binary it was 28.499999999999996, which rounded down.
    report["table2"] = [{**row, "information_seeking": 57 / 200, "stylistic": 143 / 200}]
    assert "a & 1.13 & 29 & 72 \\\\" in revision_latex(report)


def test_every_table_5_figure_shows_its_bootstrap_interval_on_the_page_and_in_the_documents(
    tmp_path, client
):
    """The issue asks for bootstrap intervals on every figure: the JSON had them, the page,
    Markdown and LaTeX left them out. Each figure is followed by [low, high] in its own units."""
    from django.urls import reverse

    from annotate.roles import RESEARCHER
    from evaluation.report_formats import _fixed
    from evaluation.revision.formats import TABLES, revision_latex, revision_markdown
    from evaluation.revision.views import _cell

    row = {
        "model": "m", "mode": "zero-shot", "shots": 0, "n": 8,
        "accuracy": 0.625, "accuracy_ci_low": 0.25, "accuracy_ci_high": 0.875,
        "predicted_good": 0.5, "predicted_good_ci_low": 0.125, "predicted_good_ci_high": 0.875,
    }  # fmt: skip
    report = {"study": "s", **{table: [] for table in TABLES}}
    report["table5"] = {"rows": [row]}
    # Halves up, as every cell: 0.625 is 0.63, 12.5 % is 13.
    assert "| m | zero-shot | 0 | 8 | 0.63 [0.25, 0.88] | 50 [13, 88] |" in revision_markdown(
        report
    )
    assert "0.63 {\\scriptsize [0.25, 0.88]} & 50 {\\scriptsize [13, 88]}" in revision_latex(report)
    # The page's cells as the documents', halves up too: 0.125 is 0.13 (Python's f"{:.2f}"
    # rounds it to even, 0.12, so the check below builds its text with the same _fixed).
    assert _cell({**row, "accuracy_ci_low": 0.125}, "accuracy")["interval"] == "[0.13, 0.88]"

    study = sample_study(tmp_path)
    run = judge_run_create(study=study, task="rating-judge", mode="zero-shot", now=timezone.now())
    judge_run_execute(run_id=run.pk)
    client.force_login(UserFactory(roles=[RESEARCHER]))
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    table5 = next(table for table in page.context["tables"] if table["name"] == "table5")
    built = revision_report_build(study=study)["table5"]["rows"]
    accuracy = table5["columns"].index("Accuracy")
    for shown, figures in zip(table5["rows"], built, strict=True):
        low, high = (_fixed(figures[f"accuracy_ci_{end}"], digits=2) for end in ("low", "high"))
        # A row of fewer than two test turns has no interval: none shown.
        expected = "" if figures["accuracy_ci_low"] is None else f"[{low}, {high}]"
        assert shown[accuracy]["interval"] == expected
    # The sample's test split is one turn: every resample is that turn, so no row has an
    # interval (they read [1.00, 1.00] and [0.00, 0.00]) and the note says why.
    assert [row[accuracy]["interval"] for row in table5["rows"]] == ["", "", ""]
    assert "[1.00, 1.00]" not in page.text and "fewer than two turns take part" in page.text


def test_table_5_shows_a_dash_for_the_mode_and_shots_of_the_baselines_as_of_the_human_row(
    tmp_path, client
):
    """Majority and Random showed a blank Mode and Shots 0 (as if zero-shot), Human "–"."""
    from django.urls import reverse

    from annotate.roles import RESEARCHER
    from evaluation.revision.formats import revision_csv

    study = sample_study(tmp_path)
    run = judge_run_create(study=study, task="rating-judge", mode="zero-shot", now=timezone.now())
    judge_run_execute(run_id=run.pk)
    client.force_login(UserFactory(roles=[RESEARCHER]))
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    table5 = next(table for table in page.context["tables"] if table["name"] == "table5")
    model, mode, shots = (table5["columns"].index(name) for name in ("Model", "Mode", "Shots"))
    shown = {row[model]["text"]: (row[mode]["text"], row[shots]["text"]) for row in table5["rows"]}
    assert shown["Majority"] == shown["Random"] == ("–", "–")
    judges = [texts for name, texts in shown.items() if name not in ("Majority", "Random")]
    assert judges == [("zero-shot", "0")]
    csv = revision_csv(revision_report_build(study=study, n_resamples=10))
    section = csv.split("# table5\r\n")[1].split("\r\n\r\n")[0].splitlines()
    header = section[0].split(",")
    for line in section[1:]:
        cells = dict(zip(header, line.split(","), strict=False))
        if cells["model"] in ("Majority", "Random"):
            assert (cells["mode"], cells["shots"]) == ("", "")


def test_paper_tables_name_the_seed_and_run_only_where_rows_would_look_alike():
    """Two judge runs split with seeds 0 and 1 give two Majority and two Random rows: the
    Markdown and LaTeX tables (which leave the run and seed out) showed them as twins."""
    from evaluation.revision.formats import TABLES, revision_latex, revision_markdown

    def row(model, run, seed):
        judge = model not in ("Majority", "Random")
        mode, shots = ("zero-shot", 0) if judge else (None, None)
        return {"model": model, "run": run, "seed": seed, "mode": mode, "shots": shots, "n": 4}

    report = {"study": "s", **{table: [] for table in TABLES}}
    report["table5"] = {"rows": [row("Majority", None, 0), row("Random", None, 0)]}
    assert "| Model | Mode | Shots | Turns |" in revision_markdown(report)
    report["table5"]["rows"] += [row("Majority", None, 1), row("m", 7, 1), row("m", 8, 1)]
    markdown = revision_markdown(report)
    assert "| Model | Run | Seed | Mode | Shots | Turns |" in markdown
    assert "| Majority | – | 1 | – | – | 4 |" in markdown
    assert "| m | 8 | 1 | zero-shot | 0 | 4 |" in markdown
    assert "Model & Run & Seed & Mode" in revision_latex(report)


def test_two_splits_of_one_seed_are_told_apart_by_their_number_runs_and_turns(tmp_path, client):
    """A second rating-judge run of seed 0 after more sessions finished draws a second split:
    the report showed two Majority and two Random rows, both "Seed 0", and the notes "Split of
    seed 0: ..." twice, with nothing saying which judge run each belonged to."""
    from django.urls import reverse

    from annotate.roles import RESEARCHER
    from evaluation.revision.formats import revision_csv, revision_latex, revision_markdown

    study = sample_study(tmp_path)
    now = timezone.now()
    first = judge_run_create(study=study, task="rating-judge", mode="zero-shot", seed=0, now=now)
    judge_run_execute(run_id=first.pk)
    path = tmp_path / "more.jsonl"
    more = {"original_question": "Q2?", "model_name": "llama", "initial_answer": "d0"}
    turns = [{"instruction": f"Edit {i}.", "answer_1": "x", "answer_2": "", "rating": "good",
              "comment": "c",
              "instruction_type": "stylistic"} for i in range(4)]  # fmt: skip
    path.write_text(json.dumps({**more, "interaction": turns}) + "\n")
    call_command("import_sessions", str(path), "--study", study.name)
    second = judge_run_create(study=study, task="rating-judge", mode="zero-shot", seed=0, now=now)
    judge_run_execute(run_id=second.pk)
    report = revision_report_build(study=study, n_resamples=10)
    table5 = report["table5"]
    assert [(s["split"], s["seed"], s["runs"], s["turns"]) for s in table5["splits"]] == [
        (1, 0, [first.pk], 6),
        (2, 0, [second.pk], 10),
    ]
    shown = [(r["model"], r["run"], r["split"]) for r in table5["rows"]]
    assert shown == [
        ("Majority", None, 1), ("Random", None, 1), ("fake", first.pk, 1),
        ("Majority", None, 2), ("Random", None, 2), ("fake", second.pk, 2),
    ]  # fmt: skip
    notes = [f"Split 1 of seed 0 (run #{first.pk}, 6 turns)",
             f"Split 2 of seed 0 (run #{second.pk}, 10 turns)"]  # fmt: skip
    markdown, latex = revision_markdown(report), revision_latex(report)
    assert "| Model | Run | Split | Mode | Shots | Turns |" in markdown
    assert "| Majority | – | 2 | – | – |" in markdown
    assert "Model & Run & Split & Mode" in latex
    assert all(note in markdown and note.replace("#", "\\#") in latex for note in notes)
    csv = revision_csv(report)
    assert f"\r\n2,0,{second.pk},10," in csv.split("# table5_splits\r\n")[1]
    assert "\r\nMajority,,2,0,,," in csv.split("# table5\r\n")[1]
    client.force_login(UserFactory(roles=[RESEARCHER]))
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    table = next(table for table in page.context["tables"] if table["name"] == "table5")
    model, split = table["columns"].index("Model"), table["columns"].index("Split")
    assert [(row[model]["text"], row[split]["text"]) for row in table["rows"]][3:5] == [
        ("Majority", "2"),
        ("Random", "2"),
    ]
    assert all(note in page.content.decode() for note in notes)


def test_every_format_gives_the_classifier_agreement_and_the_split(tmp_path, client):
    """Table 3's and 4's agreement with the human labels and Table 5's seeded split are in the
    JSON only as fields beside the rows: the CSV, Markdown, LaTeX and the page give them too."""
    from django.urls import reverse

    from annotate.roles import RESEARCHER
    from evaluation.revision.formats import revision_csv, revision_latex, revision_markdown

    study = sample_study(tmp_path)
    now = timezone.now()
    for task in ("instruction-category", "error-category"):
        judge_run_execute(run_id=judge_run_create(study=study, task=task, now=now).pk)
    run = judge_run_create(study=study, task="rating-judge", mode="zero-shot", seed=4, now=now)
    judge_run_execute(run_id=run.pk)
    report = revision_report_build(study=study, n_resamples=10)
    split = report["table5"]["splits"][0]
    assert split["seed"] == 4 and split["train"] + split["dev"] + split["test"] == 6
    sizes = f"{split['train']} train, {split['dev']} dev, {split['test']} test turns"
    # 3 of the 4 turns with a human category agree with the fake classifier (as above).
    agreement = "Classifier agreement with the human labels: 75% on the 4 turns having both"
    markdown = revision_markdown(report)
    assert agreement in markdown and "Category labels: 4 human, 2 classifier, 0 none." in markdown
    assert f"Split 1 of seed 4 (run #{run.pk}, 6 turns): {sizes}." in markdown
    assert "bootstrap intervals (10 resamples over turns, seed 0) follow each" in markdown
    latex = revision_latex(report)
    assert agreement.replace("%", "\\%") in latex and "Split 1 of seed 4" in latex
    csv = revision_csv(report)
    assert "# table3_agreement\r\nrun,compared,agreement\r\n" in csv and ",4,0.75\r\n" in csv
    assert "# table4_agreement\r\n" in csv and "# table3_sources\r\nsource,turns\r\n" in csv
    expected = (
        "# table5_splits\r\nsplit,seed,runs,turns,train,dev,test\r\n"
        f"1,4,{run.pk},6,{split['train']},{split['dev']},"
    )
    assert expected in csv
    client.force_login(UserFactory(roles=[RESEARCHER]))
    page = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert "75% on the 4 turns having both" in page and "Split 1 of seed 4" in page


def test_the_agreement_note_says_when_no_classifier_has_run_yet(tmp_path):
    """Without a classifier run the note said "no turn has both (no classifier run)": true, but
    it read as if turns were missing. A run that labelled no human-labelled turn keeps it."""
    from evaluation.revision.formats import revision_markdown, table_notes

    markdown = revision_markdown(revision_report_build(study=sample_study(tmp_path)))

    assert markdown.count("Classifier agreement with the human labels: no classifier run yet.") == 2
    assert "no turn has both" not in markdown
    table = {"rows": [], "agreement": {"run": 3, "compared": 0, "agreement": None}}
    assert table_notes({"table3": table}, "table3") == [
        "Classifier agreement with the human labels: no turn has both (run #3)."
    ]


def test_report_command_names_an_output_it_cannot_write(tmp_path):
    study = sample_study(tmp_path)
    missing = str(tmp_path / "no-such-folder" / "report.md")
    with pytest.raises(CommandError, match=r"no-such-folder/report.md: cannot write this file"):
        call_command("revision_report", "--study", study.name, "--output", missing)


def test_turns_imported_without_a_type_are_named_beside_the_type_shares(tmp_path):
    """Table 2 showed gpt-4 "100% information-seeking, 0% stylistic" when 2 of its 3 turns had
    no type: the shares are of the typed turns, and no format said so."""
    from evaluation.revision.formats import revision_latex, revision_markdown

    study = sample_study(tmp_path)
    assert "no instruction type" not in revision_markdown(
        revision_report_build(study=study, n_resamples=10)
    )
    gpt = Turn.objects.filter(session__system__name="gpt-4").order_by("id")
    Turn.objects.filter(pk__in=[t.pk for t in gpt if t.instruction_type == "stylistic"]).update(
        instruction_type=""
    )
    report = revision_report_build(study=study, n_resamples=10)
    assert report["untyped_turns"] == 2 and report["turns"] == 6
    assert report["table2"][0]["information_seeking"] == 1.0  # 1 of the 1 typed turn
    markdown = revision_markdown(report)
    shares = "2 of the 6 rated turns have no instruction type: % information-seeking and % "
    table2 = markdown.split("## Table 2")[1].split("##")[0]
    assert shares + "stylistic are of the others." in table2
    figure2 = markdown.split("## Figure 2 (top)")[1].split("##")[0]
    assert "2 of the 6 rated turns have no instruction type: they count under “all” only." in (
        figure2
    )
    assert shares.replace("%", "\\%") in revision_latex(report)


def test_an_imported_answer_given_back_as_its_own_edit_is_not_counted_edited(tmp_path):
    """Table 2's "Edited" counted a turn whose answer_2 repeats answer_1 (the paper's edit is
    a_t' != a_t, Figure 3 line 17)."""
    study = sample_study(tmp_path)
    before = revision_report_build(study=study, n_resamples=10)["table2"][0]
    unedited = Turn.objects.filter(session__system__name="gpt-4", edited_answer="").first()
    Turn.objects.filter(pk=unedited.pk).update(edited_answer=unedited.answer)
    after = revision_report_build(study=study, n_resamples=10)["table2"][0]
    assert (before["system"], before["edited"], after["edited"]) == ("gpt-4", 1, 1)


def _csv_sections(csv: str) -> dict[str, list[str]]:
    """The report CSV's tables by name, each as its lines (header first)."""
    sections = {}
    for block in csv.split("\r\n\r\n"):
        if block:
            name, *lines = block.split("\r\n")
            sections[name.removeprefix("# ")] = lines
    return sections


def test_an_empty_table_keeps_its_csv_header_the_one_it_has_once_it_has_rows(tmp_path):
    """Table 5 before any judge run (and every table of a study without sessions) was written
    as its `# table5` line and nothing else: scripts reading the columns found none."""
    from evaluation.revision.formats import revision_csv

    study = sample_study(tmp_path)
    before = _csv_sections(revision_csv(revision_report_build(study=study, n_resamples=10)))
    assert before["table5"][0].startswith("model,run,split,seed,mode,shots,n,accuracy,")
    assert before["table5_splits"] == ["split,seed,runs,turns,train,dev,test"]

    run = judge_run_create(study=study, task="rating-judge", mode="zero-shot", seed=4,
                           now=timezone.now())  # fmt: skip
    judge_run_execute(run_id=run.pk)
    ids = list(Turn.objects.order_by("id").values_list("id", flat=True))
    Rerating.objects.create(turn_id=ids[0], annotator=UserFactory(kind="expert"), rating="bad",
                            status="done", created_at=timezone.now())  # fmt: skip
    after = _csv_sections(revision_csv(revision_report_build(study=study, n_resamples=10)))
    assert len(after["table5"]) == 5  # Majority, Random, the judge, Human
    assert before["table5"][0] == after["table5"][0]
    assert before["table5_splits"][0] == after["table5_splits"][0]

    empty = Study.objects.create(name="empty", created_at=timezone.now())
    nothing = _csv_sections(revision_csv(revision_report_build(study=empty, n_resamples=10)))
    for table, lines in nothing.items():
        header = after[table][0].split(",")
        assert lines[0].split(",") == [c for c in header if ":" not in c], table


def test_table5_says_its_human_row_is_on_the_re_rated_turns_not_the_test_split(tmp_path, client):
    """Table 5 was titled "(test split)" above a Human row computed on every re-rated turn,
    and its n column read "Test turns" for it: the page and every document now say so."""
    from django.urls import reverse

    from annotate.roles import RESEARCHER
    from evaluation.revision.formats import revision_csv, revision_latex, revision_markdown

    study = sample_study(tmp_path)
    run = judge_run_create(study=study, task="rating-judge", mode="zero-shot", seed=4,
                           now=timezone.now())  # fmt: skip
    judge_run_execute(run_id=run.pk)
    note = "The Human row is not on the test split"
    before = revision_report_build(study=study, n_resamples=10)
    assert note not in revision_markdown(before)  # no re-rating, no Human row, no note
    assert "# table5_human\r\nmodel,turns,evaluated_on\r\n\r\n" in revision_csv(before)
    ids = list(Turn.objects.order_by("id").values_list("id", flat=True))
    for turn_id, rating in ((ids[0], "bad"), (ids[1], "bad"), (ids[5], "neutral")):
        Rerating.objects.create(turn_id=turn_id, annotator=UserFactory(kind="expert"), rating=rating,
                                status="done", created_at=timezone.now())  # fmt: skip

    report = revision_report_build(study=study, n_resamples=10)
    said = (
        f"{note}: it compares the first rating of each of the 3 re-rated turns with its "
        "re-rating (every finished re-rating of the study, in any split, but none by the annotator "
        "who did the session)."
    )
    markdown = revision_markdown(report)
    assert "## Table 5: automatic evaluation of instruction following (judges and baselines" in (
        markdown
    )
    assert said in markdown and "| Model | Mode | Shots | Turns |" in markdown
    assert "(test split)" not in markdown and "Test turns" not in markdown
    assert said in revision_latex(report)  # in the caption
    assert (
        "# table5_human\r\nmodel,turns,evaluated_on\r\nHuman,3,re-rated turns: first rating "
        "against re-rating; not the test split\r\n"
    ) in revision_csv(report)
    client.force_login(UserFactory(roles=[RESEARCHER]))
    page = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert said in page
    # Numbers unchanged: the three re-ratings against the first ratings (good/bad, bad/bad,
    # neutral/neutral: two of three agree).
    human = by(report["table5"]["rows"], model="Human")
    assert (human["n"], human["three_way_agreement"]) == (3, approx(2 / 3))


def test_markdown_shows_imported_names_as_text_not_html():
    """A study, system or category name comes from an imported file: in the Markdown report
    it reads as written, as in the InFoBench report's Markdown, and no viewer that renders
    Markdown (with its inline HTML) runs a tag of it."""
    from evaluation.revision.formats import TABLES, revision_markdown

    tag = '<img src=x onerror="alert(1)">'
    report = {"study": f"s{tag}", **{table: [] for table in TABLES}}
    report["table2"] = [{"system": f"a{tag}", "sessions": 1, f"good:b{tag}": 0.5}]
    report["table3"] = {
        "rows": [{"category": f"c{tag}", "turns": 1, "share": 1.0}],
        "others_rule": {"merged": [f"d{tag}"]},
    }
    markdown = revision_markdown(report)
    assert not re.search(r"(?<!\\)<", markdown)  # every < escaped
    escaped = '\\<img src=x onerror="alert(1)"\\>'
    assert f"# Revision report: s{escaped}" in markdown
    assert f"| a{escaped} | 1 | 50 |" in markdown and f"(b{escaped})" in markdown
    assert (
        f"| c{escaped} | 1 | 100 |" in markdown
        and f"others (under 5%, KIWI appendix A.3): d{escaped}." in markdown
    )


def test_a_session_given_up_changes_no_table_2_number(
    tmp_path, settings, django_capture_on_commit_callbacks
):
    """A session given up (its model call kept failing, nothing rated) is kept as a trace: it
    is no finished session, so no report number, export or collection count takes it in."""
    import io

    from annotate.revision.models import RevisionSession, Turn
    from annotate.revision.selectors import study_collection_progress
    from annotate.revision.services.exports import sessions_export_jsonl
    from annotate.revision.services.sessions import (
        session_assign,
        session_finish,
        session_give_up,
        turn_rate,
    )
    from annotate.roles import ANNOTATOR
    from tests.annotate.revision.conftest import instruct, make_live_study

    study = make_live_study(tmp_path, settings)  # 2 questions with papers x alpha, beta
    ana, ben = (
        UserFactory(username=name, roles=[ANNOTATOR], kind="expert") for name in ("ana", "ben")
    )
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        done = session_assign(study=study, user=ana, now=now)
    instruct(django_capture_on_commit_callbacks, done, ana, "Shorten it.")
    turn_rate(session_id=done.pk, user=ana, rating="good", comment="ok", now=now)
    session_finish(session_id=done.pk, user=ana, now=now)
    with django_capture_on_commit_callbacks(execute=True):
        broken = session_assign(study=study, user=ben, now=now)
    failed = instruct(django_capture_on_commit_callbacks, broken, ben, "Add the year.")
    Turn.objects.filter(pk=failed.pk).update(call_status="failed", call_error="down")
    before = revision_report_build(study=study, n_resamples=10)

    session_give_up(session_id=broken.pk, user=ben, now=now)

    assert RevisionSession.objects.get(pk=broken.pk).status == "given-up"
    after = revision_report_build(study=study, n_resamples=10)
    assert after["table2"] == before["table2"]
    assert [(row["system"], row["sessions"], row["turns"]) for row in after["table2"]] == [
        ("alpha", 1, 1),
        ("beta", 0, 0),
    ]
    assert after["turns"] == before["turns"] == 1
    assert sessions_export_jsonl(study=study, output=io.StringIO()) == 1
    progress = study_collection_progress(study=study)
    assert (progress.finished, progress.active, progress.given_up) == (1, 0, 1)
    assert progress.not_started == 2  # the pair given up is not handed out again


def test_an_unparsed_classifier_reply_is_not_compared_with_the_human_label(tmp_path):
    """A classifier reply naming no category (label "") was compared with the turn's human
    label, a disagreement, though Table 3 counts the turn's classifier label as "none": the
    note said 50% "on the 2 turns having both" where one turn has both and they agree."""
    study = sample_study(tmp_path)
    ids = list(Turn.objects.order_by("id").values_list("id", flat=True))
    now = timezone.now()
    for task, labels in (
        # ids[0] is labelled "asking for more information" by hand, ids[1] "condense" (bad,
        # "instruction is ignored"), ids[2] neutral with no error label.
        ("instruction-category", {ids[0]: "asking for more information", ids[1]: ""}),
        ("error-category", {ids[1]: "", ids[2]: "instruction is ignored"}),
    ):
        run = RevisionJudgeRun.objects.create(
            study=study, task=task, prompt_version="x", status="done", created_at=now,
            finished_at=now,
        )  # fmt: skip
        for turn_id, label in labels.items():
            RevisionPrediction.objects.create(run=run, turn_id=turn_id, label=label, reply="?")
    report = revision_report_build(study=study, n_resamples=10)
    table3 = report["table3"]
    assert table3["sources"] == {"human": 4, "none": 2}
    assert (table3["agreement"]["compared"], table3["agreement"]["agreement"]) == (1, 1.0)
    table4 = report["table4"]["agreement"]
    assert (table4["compared"], table4["agreement"]) == (0, None)


def _long_study(tmp_path):
    """30 rated turns (10 a session), good at positions 1, 2, 4, 5, 7, 8 and 10."""
    sessions = [
        {
            "original_question": f"Q{n}?",
            "model_name": "gpt-4",
            "initial_answer": "a0",
            "interaction": [
                {"instruction": f"Do {n}.{t}.", "answer_1": f"a{t}", "answer_2": "",
                 "rating": "neutral" if t % 3 == 0 else "good", "comment": "c"}
                for t in range(1, 11)
            ],
        }
        for n in range(3)
    ]  # fmt: skip
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    call_command("import_sessions", str(path), "--study", "long")
    return Study.objects.get(name="long")


def test_a_table5_rows_interval_is_the_one_its_own_turns_give_with_the_reports_seed(tmp_path):
    """Every Table 5 row drew its bootstrap from one generator shared in row order: a row's
    interval was not what its turns give with the report's seed (only the first row's was),
    and running another judge moved the Human row's published interval."""
    from evaluation.stats.revision import METRICS, binary_metric_intervals

    study = _long_study(tmp_path)
    ids = list(Turn.objects.order_by("id").values_list("id", flat=True))
    good = dict(Turn.objects.values_list("id", "rating"))
    now = timezone.now()
    for turn_id, rating in zip(ids[:12], ["bad", "good", "neutral"] * 4, strict=True):
        Rerating.objects.create(turn_id=turn_id, annotator=UserFactory(kind="expert"), rating=rating,
                                status="done", created_at=now)  # fmt: skip

    def intervals(row):
        return {name: (row[f"{name}_ci_low"], row[f"{name}_ci_high"]) for name in METRICS}

    def by_hand(truth, predicted):
        rng = np.random.default_rng(3)
        found = binary_metric_intervals(truth, predicted, rng, n_resamples=200)
        return {name: tuple(None if np.isnan(v) else v for v in found[name]) for name in METRICS}

    human_truth = [good[t] == "good" for t in ids[:12]]
    human_second = [r == "good" for r in ["bad", "good", "neutral"] * 4]
    alone = revision_report_build(study=study, n_resamples=200, seed=3)["table5"]["rows"]
    assert intervals(by(alone, model="Human")) == by_hand(human_truth, human_second)

    test = ids[10:]
    run = RevisionJudgeRun.objects.create(
        study=study, task="rating-judge", mode="zero-shot", prompt_version="x", seed=4,
        split={"train": ids[:10], "dev": [], "test": test}, status="done", created_at=now,
        finished_at=now, endpoint_name="judge-a",
    )  # fmt: skip
    said = ["good" if i % 4 else "bad" for i in range(len(test))]
    for turn_id, label in zip(test, said, strict=True):
        RevisionPrediction.objects.create(run=run, turn_id=turn_id, label=label)
    rows = revision_report_build(study=study, n_resamples=200, seed=3)["table5"]["rows"]
    judge = by(rows, model="judge-a")  # after Majority and Random in the table
    truth = [good[t] == "good" for t in test]
    assert intervals(judge) == by_hand(truth, [label == "good" for label in said])
    assert intervals(by(rows, model="Human")) == intervals(by(alone, model="Human"))


def test_a_latex_row_starting_with_a_bracket_is_not_read_as_the_last_rows_spacing():
    """A name starting with "[" began a LaTeX row right after the previous row's `\\\\`,
    which LaTeX reads as `\\\\[<length>]`: the table did not compile ("Illegal unit")."""
    from evaluation.revision.formats import TABLES, revision_latex

    report = {"study": "s", **{table: [] for table in TABLES}}
    report["table2"] = [{"system": "gpt-4", "sessions": 1}, {"system": "[v2] llama", "sessions": 2}]
    latex = revision_latex(report)
    assert "\\\\\n{[}v2] llama & 2 \\\\\n" in latex
    assert not re.search(r"\\\\\s*\[", latex)


def test_a_share_of_no_turn_in_tables_2_to_4_is_said_to_be_undefined_not_0():
    """Table 3's % good of a system none of whose turns is in the category is 0/0: null, "–"
    in Markdown and LaTeX, empty in CSV, as Table 5's undefined figures, and like them said
    under the table (it stood there unexplained, a reader could take "–" for a missing 0)."""
    from evaluation.revision.formats import (
        SHARE_UNDEFINED_NOTE,
        TABLES,
        revision_csv,
        revision_latex,
        revision_markdown,
        table_notes,
    )

    row = {"category": "editing", "turns": 2, "share": 1.0, "information_seeking": 0.5,
           "stylistic": 0.5, "good:a": 0.5, "good:b": None}  # fmt: skip
    report = {"study": "s", **{table: [] for table in TABLES}}
    agreement = {"run": None, "compared": 0, "agreement": None}
    report["table3"] = {"rows": [row], "categories": [row], "agreement": agreement, "sources": {}}
    report["table4"] = {"rows": [], "categories": [], "agreement": agreement}
    report["table5"] = {"rows": [], "splits": []}
    assert SHARE_UNDEFINED_NOTE in table_notes(report, "table3")
    assert "| 50 | – |" in revision_markdown(report)
    assert SHARE_UNDEFINED_NOTE.split(":")[0] in revision_markdown(report)
    assert SHARE_UNDEFINED_NOTE.split(":")[0] in revision_latex(report)
    assert "0.5,\r\n" in revision_csv(report)  # good:b empty at the end of the row
    report["table3"]["rows"] = [{**row, "good:b": 0.0}]
    assert SHARE_UNDEFINED_NOTE not in table_notes(report, "table3")


@needs_pdflatex
def test_the_latex_export_compiles_with_hostile_names_and_every_table(tmp_path):
    """Every KIWI table as pasted into a paper, with a model name full of LaTeX's special
    characters, the classifiers' and the rating judge's rows and their notes, must typeset."""
    from annotate.revision.models import StudySystem
    from evaluation.revision.formats import revision_latex

    study = sample_study(tmp_path)
    StudySystem.objects.filter(study=study, name="llama").update(name="l&l_a%$#{}~^\\")
    now = timezone.now()
    for task in ("instruction-category", "error-category"):
        judge_run_execute(run_id=judge_run_create(study=study, task=task, now=now).pk)
    run = judge_run_create(study=study, task="rating-judge", mode="zero-shot", seed=4, now=now)
    judge_run_execute(run_id=run.pk)
    latex = revision_latex(revision_report_build(study=study, n_resamples=10))
    assert "l\\&l" in latex
    assert_latex_compiles(tmp_path, latex)
