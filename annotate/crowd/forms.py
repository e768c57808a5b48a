"""Forms of the crowd admin pages: they parse input; services decide."""

from __future__ import annotations

import json
from decimal import Decimal

from django import forms
from django.forms.boundfield import BoundField

from annotate.crowd.limits import DESCRIPTION_MAX_CHARS, KEYWORDS_MAX_CHARS, TITLE_MAX_CHARS
from annotate.crowd.platforms import platform_label
from annotate.crowd.services.publishing import (
    SECONDS_AT_MOST,
    PublishSettings,
    default_qualifications,
)

# Settings of a platform's HITs (MTurk's, and the offline platform's that plays it) that a
# self-hosted link has no use for: the form hides them for one and ignores their values.
HIT_ONLY_FIELDS = (
    "auto_approval_hours",
    "lifetime_hours",
    "min_percent_approved",
    "min_hits_approved",
    "locale",
    "qualifications_json",
)
# A self-hosted link's own settings (a batch's form only), which a HIT's platform has no use
# for: the form hides them for one and ignores their values, the mirror of HIT_ONLY_FIELDS.
LINK_ONLY_FIELDS = ("completion_code", "completion_url")
SELFHOSTED = "selfhosted"


class _PublishBoundField(BoundField):
    """A row of the publish form: a HIT-only setting's row is marked `hit-only` (site.js shows
    or hides it as the platform changes), and `platform-hidden` while the platform chosen is
    the self-hosted link (its input is disabled then: PublishForm); a link-only setting's row
    likewise `link-only`, hidden while a HIT's platform is chosen."""

    def css_classes(self, extra_classes=None) -> str:
        link = self.form.chosen_platform() == SELFHOSTED
        for names, marker, hidden in (
            (HIT_ONLY_FIELDS, "hit-only", link),
            (LINK_ONLY_FIELDS, "link-only", not link),
        ):
            if self.name in names:
                extra_classes = " ".join(
                    [extra_classes or "", marker, "platform-hidden" if hidden else ""]
                ).strip()
        return super().css_classes(extra_classes)


class PublishForm(forms.Form):
    bound_field_class = _PublishBoundField

    platform = forms.ChoiceField()
    # MTurk's limits, for every platform (annotate.crowd.limits): the browser stops there too.
    title = forms.CharField(max_length=TITLE_MAX_CHARS)
    description = forms.CharField(
        max_length=DESCRIPTION_MAX_CHARS, widget=forms.Textarea(attrs={"rows": 3})
    )
    keywords = forms.CharField(max_length=KEYWORDS_MAX_CHARS, required=False)
    reward_usd = forms.DecimalField(
        label="Reward per assignment ($)", min_value=Decimal("0"), max_digits=8, decimal_places=2
    )
    # The longest times the platform takes, in the form's units (the browser refuses more too).
    assignment_minutes = forms.IntegerField(
        min_value=1, max_value=SECONDS_AT_MOST["assignment_duration_seconds"] // 60, initial=60
    )
    auto_approval_hours = forms.IntegerField(
        min_value=0, max_value=SECONDS_AT_MOST["auto_approval_delay_seconds"] // 3600, initial=72
    )
    lifetime_hours = forms.IntegerField(
        min_value=1, max_value=SECONDS_AT_MOST["lifetime_seconds"] // 3600, initial=168
    )
    min_percent_approved = forms.IntegerField(
        label="Workers' approval rate at least (%)", min_value=0, max_value=100, initial=90
    )
    min_hits_approved = forms.IntegerField(
        label="Workers' approved HITs at least", min_value=0, initial=500
    )
    locale = forms.CharField(
        max_length=2, required=False, help_text="Optional country code, e.g. US."
    )
    qualifications_json = forms.CharField(
        label="Qualification requirements (JSON)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Advanced: MTurk QualificationRequirements as JSON; replaces the three above.",
    )
    completion_code = forms.CharField(
        label="Self-hosted: completion code",
        max_length=100,
        required=False,
        help_text="The code your recruiting site (Prolific...) pays participants for; shown after "
        "their last submit.",
    )
    completion_url = forms.URLField(
        label="Self-hosted: completion URL",
        required=False,
        assume_scheme="https",
        help_text="Or where participants go after the submit, e.g. "
        "https://app.prolific.com/submissions/complete?cc=…",
    )
    confirm_total = forms.DecimalField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, platforms: list[str], completion: bool = False, **kwargs) -> None:
        """`completion`: ask for a self-hosted link's completion code and URL (a batch's; a
        human study keeps its own on the study)."""
        super().__init__(*args, **kwargs)
        self.fields["platform"].choices = [(name, platform_label(name)) for name in platforms]
        if not completion:
            del self.fields["completion_code"], self.fields["completion_url"]
        # A link has no use for the HIT-only settings. Disabled, each is rendered with the
        # disabled attribute (the browser neither checks nor sends it: an emptied required one
        # had blocked the submit without a word) and its default, and cleaned from its default
        # whatever was sent (valid qualifications left from MTurk's choice had been refused by
        # the publish's check). Rendered so for the platform sent, not left to site.js: the
        # preview page showed them empty and required until its deferred script ran, and a
        # Confirm pressed before that was refused by the browser, silently.
        link = self.chosen_platform() == SELFHOSTED
        for name in HIT_ONLY_FIELDS:
            self.fields[name].disabled = link
            self.fields[name].widget.attrs["data-hit-only"] = ""  # site.js's, as the choice changes
        # A HIT's platform has no use for a link's completion code and URL: the same, mirrored
        # (a code typed under MTurk's choice was stored on the MTurk publication, shown nowhere).
        for name in LINK_ONLY_FIELDS:
            if name in self.fields:
                self.fields[name].disabled = not link
                self.fields[name].widget.attrs["data-link-only"] = ""

    def chosen_platform(self) -> str:
        """The platform the form is for: the one sent, else the one it starts with."""
        field = self.fields["platform"]
        if self.is_bound:
            return self.data.get(self.add_prefix("platform"), "")
        return self.initial.get("platform") or next(iter(field.choices), ("", ""))[0]

    def clean_qualifications_json(self) -> list[dict] | None:
        text = self.cleaned_data["qualifications_json"].strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not JSON: {error}") from error
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise forms.ValidationError("Expected a JSON list of objects.")
        return value

    def publish_settings(self) -> PublishSettings:
        data = self.cleaned_data
        requirements = data["qualifications_json"] or default_qualifications(
            min_percent_approved=data["min_percent_approved"],
            min_hits_approved=data["min_hits_approved"],
            locale=data["locale"].strip(),
        )
        return PublishSettings(
            title=data["title"],
            description=data["description"],
            keywords=data["keywords"],
            reward_usd=data["reward_usd"],
            assignment_duration_seconds=data["assignment_minutes"] * 60,
            auto_approval_delay_seconds=data["auto_approval_hours"] * 3600,
            lifetime_seconds=data["lifetime_hours"] * 3600,
            qualification_requirements=requirements,
            **self.completion(),
        )

    def completion(self) -> dict[str, str]:
        """The completion code and URL, for a self-hosted link only (MTurk takes the HIT back)."""
        data = self.cleaned_data
        if data["platform"] != "selfhosted" or "completion_code" not in self.fields:
            return {"completion_code": "", "completion_url": ""}
        return {
            "completion_code": data["completion_code"],
            "completion_url": data["completion_url"],
        }
