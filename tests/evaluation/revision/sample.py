"""A small study whose every report figure is worked out by hand in test_reports.py."""

import json

from annotate.revision.models import Study
from annotate.revision.services.imports import sessions_import


def turn(instruction, kind, rating, *, edit="", category="", error=""):
    row = {
        "instruction": instruction,
        "answer_1": f"answer to {instruction}",
        "answer_2": edit,
        "rating": rating,
        "comment": f"comment on {instruction}",
        "instruction_type": kind,
    }
    if category:
        row["instruction_category"] = category
    if error:
        row["error_category"] = error
    return row


SESSIONS = [
    {
        "original_question": "Q1?",
        "model_name": "gpt-4",
        "initial_answer": "a0",
        "interaction": [
            turn(
                "Add an example of results.",
                "information-seeking",
                "good",
                category="asking for more information",
            ),
            turn(
                "Shorten the answer.",
                "stylistic",
                "bad",
                edit="E",
                category="condense",
                error="instruction is ignored",
            ),
        ],
    },
    {
        "original_question": "Q2?",
        "model_name": "gpt-4",
        "initial_answer": "b0",
        "interaction": [
            turn("Delete the last sentence.", "stylistic", "neutral", category="remove"),
        ],
    },
    {
        "original_question": "Q1?",
        "model_name": "llama",
        "initial_answer": "c0",
        "interaction": [
            turn(
                "Give results from all papers.",
                "information-seeking",
                "bad",
                category="asking for more information",
            ),
            turn("Tell me more.", "information-seeking", "good"),
            turn("Move paragraph two up.", "stylistic", "neutral", edit="X"),
        ],
    },
]


def sample_study(tmp_path, name="sample") -> Study:
    path = tmp_path / "sample.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SESSIONS))
    sessions_import(path=str(path), study_name=name)
    return Study.objects.get(name=name)
