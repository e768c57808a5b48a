import json

import pytest

from annotate.revision.models import Study
from annotate.revision.services.imports import study_upload

QUESTIONS = [
    {
        "question": "How do retrieval-augmented models cite sources?",
        "documents": [
            {"title": "Paper Zero", "text": "Retrieval models fetch passages.\n\nCitations help."},
            {"title": "Paper One", "text": "Quantization shrinks weights.\n\nEvaluation of cite."},
        ],
    },
    {
        "question": "What limits long-context models?",
        "documents": [{"title": "Paper Two", "text": "Attention is quadratic in length."}],
    },
]


def make_live_study(tmp_path, settings) -> Study:
    """Two questions with documents, systems alpha and beta; model calls run inline."""
    settings.REVISION_GENERATION = "inline"
    path = tmp_path / "study.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    study_upload(path=str(path), study_name="live", systems=["alpha", "beta"])
    return Study.objects.get(name="live")


@pytest.fixture
def study(db, tmp_path, settings) -> Study:
    return make_live_study(tmp_path, settings)


def instruct(capture, session, user, instruction: str, kind: str = "stylistic"):
    """The annotator sends an instruction; the model's revision (run on commit) is done after."""
    from django.utils import timezone

    from annotate.revision.services.sessions import turn_start

    with capture(execute=True):
        return turn_start(
            session_id=session.pk,
            user=user,
            instruction=instruction,
            instruction_type=kind,
            now=timezone.now(),
        )
