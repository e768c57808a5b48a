"""Forms of the engine pages (an endpoint, a generation run), the endpoint choice every page that
picks an endpoint shows, and the spending cap field every form that starts an engine run shares."""

from __future__ import annotations

from django import forms
from django.conf import settings

from annotate.engine.generation import DEFAULT_TEMPLATE, generation_templates
from annotate.engine.models import Endpoint, EngineRun
from annotate.engine.services.endpoints import EDITABLE_FIELDS
from annotate.models import Benchmark, Subset

# The rule is engine_run_check_may_start's: only admins may use an endpoint that spends money.
# The offline fake spends none, though it may have prices: they price its calls (the cost its
# runs and the reports show is what they would have cost), nothing is billed.
OFFLINE_FAKE_LABEL = "offline fake: no bill, researchers may use it"
PAID_API_LABEL = "paid API: admins only"


def endpoint_cost_label(endpoint: Endpoint) -> str:
    """What a choice of this endpoint (or of what calls it) says about who may spend on it."""
    return PAID_API_LABEL if endpoint.spends_money else OFFLINE_FAKE_LABEL


class EndpointChoiceField(forms.ModelChoiceField):
    """An endpoint by name, saying whether it bills nobody or is only for admins."""

    def label_from_instance(self, obj: Endpoint) -> str:
        return f"{obj.name} ({endpoint_cost_label(obj)})"


class EndpointForm(forms.ModelForm):
    """The fields an admin edits; validated again by the service (allow-listed key variable)."""

    stop = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Stop sequences, one per line (blank: none).",
    )

    class Meta:
        model = Endpoint
        fields = ["name", *EDITABLE_FIELDS]
        labels = {
            "base_url": "Address (base URL)",
            "api_key_env": "API key variable",
            "max_tokens": "Max tokens",
            "top_p": "Top p",
            "timeout_seconds": "Timeout (seconds)",
            "requests_per_minute": "Requests per minute",
            "tokens_per_minute": "Tokens per minute",
            "price_prompt_per_1k": "Price per 1k prompt tokens (USD)",
            "price_completion_per_1k": "Price per 1k completion tokens (USD)",
        }
        help_texts = {
            "name": "How judge configurations, runs and systems refer to it; unique, "
            "whatever the capitals.",
            "base_url": "An OpenAI-compatible server, ending before /chat/completions, "
            "e.g. https://api.openai.com/v1. "
            "Blank: the offline fake model (no network, no cost).",
            "model": "The model name the server expects, e.g. gpt-4o-mini.",
            "temperature": "From 0 to 2; 0 for reproducible answers.",
            "timeout_seconds": "One call's limit (more than 0); a call over it is retried.",
            "concurrency": "Calls in flight at once for this endpoint (1 to 256).",
            "requests_per_minute": "The limiter keeps every run of this endpoint under it.",
            "tokens_per_minute": "Prompt and completion tokens together.",
            "max_retries": "For timeouts, rate limits and server errors, with backoff.",
            "price_prompt_per_1k": "Used to price every call and to estimate a run before it "
            "starts; 0 for a free server.",
            "price_completion_per_1k": "As above, for the answer's tokens.",
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["stop"] = "\n".join(self.instance.stop or [])
        else:  # a new endpoint: blank limits are the defaults of what it calls
            for name, default in (("requests_per_minute", 500), ("tokens_per_minute", 200_000)):
                field = self.fields[name]
                field.required, field.initial = False, None
                self.initial.pop(name, None)
                field.help_text = (
                    f"{field.help_text} Blank: {default:,} for an address, no limit for the "
                    "offline fake (it costs nothing)."
                )
        allowed = ", ".join(settings.ENGINE_API_KEY_ENVS)  # read now: a setting, not a constant
        self.fields["api_key_env"].help_text = (
            "The environment variable of the web and worker processes that holds the key, one "
            f"of {allowed} (setting ENGINE_API_KEY_ENVS); blank for a server that needs none."
        )

    def clean_stop(self) -> list[str]:
        return [line for line in self.cleaned_data["stop"].splitlines() if line]

    def validate_unique(self) -> None:
        """Leave the name to the service (`endpoint_create`, `endpoint_update`): it refuses it
        in any capitals and names the endpoint that has it, where Django's own check said only
        "Endpoint with this Name already exists"."""
        exclude = {*self._get_validation_exclusions(), "name"}
        try:
            self.instance.validate_unique(exclude=exclude)
        except forms.ValidationError as error:
            self._update_errors(error)


class SpendingCapField(forms.DecimalField):
    """The optional spending cap of a run (EngineRun.spending_cap_usd): dollars, 0 or more."""

    NEGATIVE = "The spending cap cannot be negative: give 0 or more dollars, or none for no cap."

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("label", "Spending cap (USD)")
        kwargs.setdefault("help_text", "The run stops before a call would pass it. Blank: no cap.")
        stored = EngineRun._meta.get_field("spending_cap_usd")  # refuse what it cannot hold
        super().__init__(
            min_value=0,
            max_digits=stored.max_digits,
            decimal_places=stored.decimal_places,
            **kwargs,
        )
        self.error_messages["min_value"] = self.NEGATIVE


class ReplaceLabelsField(forms.BooleanField):
    """The "Replace earlier labels" box: starting a run whose work would overwrite labels
    another run wrote (a judge's) needs it ticked. One label on every page that asks."""

    def __init__(self, **kwargs) -> None:
        super().__init__(required=False, label="Replace earlier labels", **kwargs)


class RunAgainForm(forms.Form):
    """The run page's "Run again": the cap the run goes on with (its own, unless changed), and
    "Replace earlier labels", only with `asks_replace`: where running it again would overwrite
    another run's labels (`engine_run_again_warning`), and when reading what was sent."""

    spending_cap_usd = SpendingCapField(
        help_text="A run stopped by its cap stops again at once unless you raise it. Blank: no cap."
    )
    replace = ReplaceLabelsField(
        help_text="Another run labelled responses this run has left (said above): running it "
        "again asks those questions and overwrites its labels."
    )

    # What the page's warning said (AgainWarning.seen), sent back with the box: a Run again whose
    # labels changed since the page was shown is asked again. "": the page showed no warning.
    replace_seen = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, asks_replace: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not asks_replace:
            del self.fields["replace"]
            del self.fields["replace_seen"]


class GenerationRunForm(forms.Form):
    endpoint = EndpointChoiceField(Endpoint.objects.order_by("name"))
    benchmark = forms.ModelChoiceField(Benchmark.objects.all())
    system = forms.CharField(
        max_length=200, help_text="Created on first use, bound to the endpoint."
    )
    subset = forms.ChoiceField(choices=[("", "All instructions"), *Subset.choices], required=False)
    instruction_ids = forms.CharField(
        required=False, label="Only these instruction ids", help_text="Comma-separated."
    )
    sample = forms.IntegerField(required=False, min_value=1, label="Random sample of N")
    seed = forms.IntegerField(initial=0, min_value=0, required=False)
    template = forms.ChoiceField(choices=(), initial=DEFAULT_TEMPLATE)
    replace = forms.BooleanField(
        required=False,
        label="Regenerate responses made with other settings (old ones kept apart, with labels)",
    )
    spending_cap_usd = SpendingCapField()

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["template"].choices = [(name, name) for name in generation_templates()]

    def clean_instruction_ids(self) -> list[str]:
        value = self.cleaned_data["instruction_ids"]
        return [item.strip() for item in value.split(",") if item.strip()]
