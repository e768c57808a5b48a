"""Search and filters of the researchers' lists (django-filter): benchmarks, instructions, labels."""

from __future__ import annotations

import django_filters
from django import forms
from django.db.models import Q, QuerySet

from annotate.models import (
    AnnotatorKind,
    Benchmark,
    Instruction,
    Label,
    LabelValue,
    Subset,
    System,
)
from annotate.selectors.labels import LabelAnnotators, counted_q

PAGE_SIZE = 50


class BenchmarkFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search")

    class Meta:
        model = Benchmark
        fields: list[str] = []

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(name__icontains=value) | Q(description__icontains=value))


class InstructionFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search id or text")
    subset = django_filters.ChoiceFilter(choices=Subset.choices, empty_label="easy and hard")
    category = django_filters.CharFilter(lookup_expr="icontains", label="Domain")

    class Meta:
        model = Instruction
        fields = ["subset", "category"]

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(Q(external_id__icontains=value) | Q(text__icontains=value))


COUNTED_CHOICES = [("yes", "counted in results"), ("no", "not counted")]
KIND_CHOICES = [
    (AnnotatorKind.EXPERT.value, "expert"),
    (AnnotatorKind.CROWD.value, "crowd worker"),
    (AnnotatorKind.LLM.value, "LLM judge"),
    (AnnotatorKind.UNDECIDED.value, "not decided"),
]


class LabelFilter(django_filters.FilterSet):
    """A benchmark's labels. The annotator choices carry the names the viewer may see, and the
    search reads instructions only: no filter matches a hidden crowd worker's platform id."""

    q = django_filters.CharFilter(method="search", label="Search instruction id or text")
    instruction = django_filters.NumberFilter(
        field_name="response__instruction_id", widget=forms.HiddenInput
    )
    system = django_filters.ModelChoiceFilter(
        field_name="response__system",
        queryset=System.objects.none(),
        empty_label="every system",
        label="System",
    )
    annotator = django_filters.ChoiceFilter(
        field_name="annotator_id", choices=(), empty_label="every annotator", label="Annotator"
    )
    kind = django_filters.ChoiceFilter(
        method="of_kind", choices=KIND_CHOICES, empty_label="every kind", label="Annotator kind"
    )
    value = django_filters.ChoiceFilter(
        choices=LabelValue.choices, empty_label="every value", label="Value"
    )
    subset = django_filters.ChoiceFilter(
        field_name="response__instruction__subset",
        choices=Subset.choices,
        empty_label="easy and hard",
        label="Subset",
    )
    domain = django_filters.CharFilter(
        field_name="response__instruction__category", lookup_expr="icontains", label="Domain"
    )
    counted = django_filters.ChoiceFilter(
        method="by_counting", choices=COUNTED_CHOICES, empty_label="counted or not", label="Counts"
    )

    class Meta:
        model = Label
        fields: list[str] = []

    def __init__(self, *args, annotators: LabelAnnotators, systems: QuerySet, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.annotators = annotators
        self.filters["system"].queryset = systems
        self.filters["annotator"].extra["choices"] = [
            (str(pk), name) for pk, name in annotators.names.items()
        ]

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(
            Q(response__instruction__external_id__icontains=value)
            | Q(response__instruction__text__icontains=value)
        )

    def of_kind(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(annotator_id__in=self.annotators.ids_of_kind(value))

    def by_counting(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        counted = counted_q(self.annotators)
        return queryset.filter(counted if value == "yes" else ~counted)
