"""The form that starts a KIWI classifier or rating-judge run on an engine endpoint."""

from __future__ import annotations

from django import forms

from annotate.engine.forms import EndpointChoiceField, SpendingCapField
from annotate.engine.models import Endpoint
from evaluation.revision.models import SEED_MAX, JudgeTask, ShotMode
from evaluation.stats.revision import split_sizes


class RevisionJudgeRunForm(forms.Form):
    """Classifiers take an endpoint and a spending cap; the rating judge also its mode, k and
    split seed."""

    endpoint = EndpointChoiceField(
        Endpoint.objects.order_by("name"), help_text="The model that answers (engine endpoint)."
    )
    mode = forms.ChoiceField(choices=ShotMode.choices, initial=ShotMode.ZERO)
    shots = forms.IntegerField(
        min_value=1,
        max_value=100,
        initial=10,
        required=False,
        label="k (k-shot only)",
        help_text="Examples: the k training turns with the most BM25-similar instructions.",
    )
    seed = forms.IntegerField(
        min_value=0,
        max_value=SEED_MAX,
        initial=0,
        help_text="Seed of the train/dev/test split (the paper: 888/186/186 of 1,260 turns).",
    )
    spending_cap_usd = SpendingCapField()

    def __init__(self, *args, task: str, rated_turns: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        if task != JudgeTask.RATING:
            for name in ("mode", "shots", "seed"):
                del self.fields[name]
        elif rated_turns is not None:
            train, dev, test = split_sizes(rated_turns)
            self.fields["seed"].help_text = (
                f"Seed of the train/dev/test split of this study's {rated_turns:,} rated turns: "
                f"{train:,}/{dev:,}/{test:,} (the paper: 888/186/186 of 1,260)."
            )

    def clean(self) -> dict:
        data = super().clean()
        if data.get("mode") == ShotMode.K and not data.get("shots"):
            self.add_error("shots", "A k-shot judge needs k, at least 1.")
        return data

    def launch_arguments(self) -> dict:
        """The cleaned values as keyword arguments of judges.judge_run_launch (and _prepare)."""
        data = self.cleaned_data
        common = {"endpoint": data["endpoint"], "spending_cap_usd": data["spending_cap_usd"]}
        if self.task != JudgeTask.RATING:
            return common
        return {
            **common,
            "mode": data["mode"],
            "shots": data.get("shots") or 0,
            "seed": data["seed"],
        }
