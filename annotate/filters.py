"""Search and filters of the researchers' lists (django-filter): benchmarks and instructions."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from annotate.models import Benchmark, Instruction, Subset

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
