"""Demo data for verbalizer manipulation, so every figure shows numbers on a fresh machine.

Two small datasets of our own (fixtures/verbalizer/), one set over all twelve mappings in both
modes, runs of two of the engine's offline fake models (a small one that mostly falls back to
its priors under flipped labels, a large one that mostly follows them: the fake's skill comes
from the size in the model's name), and answers of three demo readers to the golden and
flipped-golden prompts. Safe to run again: each piece is made once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from annotate.engine.models import Endpoint
from annotate.engine.services import endpoint_create
from annotate.models import Annotator, AnnotatorKind
from annotate.roles import RESEARCHER
from annotate.verbalizer.models import (
    ClassificationDataset,
    EvaluationSet,
    HumanAnswer,
    HumanStudy,
    SystemRun,
)
from annotate.verbalizer.services.humans import human_study_create
from annotate.verbalizer.services.imports import classification_import
from annotate.verbalizer.services.runs import verbalizer_run_create, verbalizer_run_execute
from annotate.verbalizer.services.sets import evaluation_set_create

DEMO_DIR = Path(settings.BASE_DIR) / "fixtures" / "verbalizer"
DATASETS = (
    ("Demo sentiment", "demo_sentiment.jsonl", ("positive", "negative"), "sentiment"),
    ("Demo entailment", "demo_entailment.jsonl", ("entailment", "not entailment"), "entailment"),
)
SET_NAME = "Demo verbalizer set"
# (system, its endpoint, the endpoint's model, size in billions). Endpoints of their own: the
# limits are raised so the demo loads fast.
SYSTEMS = (
    ("demo-fake-1b", "demo-fake-verbalizer-1b", "fake-1b", 1),
    ("demo-fake-70b", "demo-fake-verbalizer-70b", "fake-70b", 70),
)
STUDY = "Demo readers: golden vs flipped golden"
READERS = ("Demo reader 1", "Demo reader 2", "Demo reader 3")


@transaction.atomic
def _datasets_and_set() -> EvaluationSet:
    for name, filename, labels, family in DATASETS:
        if not ClassificationDataset.objects.filter(name=name, items__isnull=False).exists():
            classification_import(
                path=str(DEMO_DIR / filename), dataset=name, fmt="jsonl", labels=labels,
                family=family,
            )  # fmt: skip
    existing = EvaluationSet.objects.filter(name=SET_NAME).first()
    if existing:
        return existing
    return evaluation_set_create(
        name=SET_NAME, datasets=[d[0] for d in DATASETS], items=8, seed=2023,
        mappings="all", modes=["direct", "cot"],
    ).evaluation_set  # fmt: skip


def _fake_run(
    evaluation_set: EvaluationSet, system: str, endpoint: str, model: str, size: int
) -> None:
    if SystemRun.objects.filter(evaluation_set=evaluation_set, system__name=system).exists():
        return
    if not Endpoint.objects.filter(name=endpoint).exists():
        endpoint_create(
            name=endpoint, model=model, base_url="", api_key_env="", requests_per_minute=60_000,
            tokens_per_minute=10_000_000,
        )  # fmt: skip
    system_run = verbalizer_run_create(
        evaluation_set=evaluation_set, system=system, endpoint=endpoint, model_size_b=size
    )
    verbalizer_run_execute(system_run=system_run)


def _reader_choice(reader: str, prompt) -> str:
    """A demo reader follows the instruction nine times in ten, fixed per reader and prompt."""
    digest = hashlib.sha256(f"{reader}|{prompt.pk}".encode()).digest()
    wrong = (
        prompt.negative_word
        if prompt.expected_word == prompt.positive_word
        else prompt.positive_word
    )
    return wrong if digest[0] % 10 == 0 else prompt.expected_word


@transaction.atomic
def _readers(evaluation_set: EvaluationSet) -> None:
    # The demo's researcher owns the study: the demo annotators are told their label-word
    # tasks are open and the researcher to decide their kind, which a researcher may do only
    # when all of a person's answers are in studies of theirs (annotators_kind_locked). A study
    # made by an older demo, owned by nobody, becomes theirs too.
    researcher = User.objects.filter(groups__name=RESEARCHER).order_by("pk").first()
    if HumanStudy.objects.filter(name=STUDY).exists():
        HumanStudy.objects.filter(name=STUDY, created_by=None).update(created_by=researcher)
        return
    study = human_study_create(
        evaluation_set=evaluation_set, name=STUDY, mappings=["golden", "flipped-golden"],
        modes=["direct"], answers_per_prompt=5, created_by=researcher,
    )  # fmt: skip
    for name in READERS:
        reader, _ = Annotator.objects.get_or_create(
            name=name, defaults={"kind": AnnotatorKind.EXPERT}
        )
        HumanAnswer.objects.bulk_create(
            HumanAnswer(
                study=study, prompt=prompt, annotator=reader, word=_reader_choice(name, prompt),
                seconds=4.0 + (prompt.pk % 7),
            )
            for prompt in study.prompts.all()
        )  # fmt: skip


def demo_verbalizer_create() -> str:
    """Create every demo piece that is missing; return a one-line summary."""
    evaluation_set = _datasets_and_set()
    for system in SYSTEMS:
        _fake_run(evaluation_set, *system)
    _readers(evaluation_set)
    return (
        f"Verbalizer demo: set '{SET_NAME}' with {evaluation_set.prompts.count()} prompts, "
        f"runs of the fake models {' and '.join(s[0] for s in SYSTEMS)} and "
        f"{HumanAnswer.objects.filter(study__name=STUDY).count()} answers of demo readers."
    )
