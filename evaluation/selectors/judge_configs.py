"""Reads of judge configurations: the Judges page's list, what its form needs first, and a
run's judge and benchmark asked for by name (the API and the console)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, QuerySet

from annotate.engine.selectors import endpoint_prerequisite_missing
from annotate.models import Benchmark
from annotate.selectors.prerequisites import Prerequisite
from evaluation.errors import JudgeNotFoundError, JudgeRunChoiceNotFoundError
from evaluation.models import JudgeConfig


def judge_config_list() -> QuerySet[JudgeConfig]:
    """Every judge configuration by name, with its endpoint and `run_count`, in one query."""
    return (
        JudgeConfig.objects.select_related("endpoint")
        .annotate(run_count=Count("runs"))
        .order_by("name")
    )


def judge_config_get(*, config_id: int | str) -> JudgeConfig:
    """Return the configuration; JudgeNotFoundError for a missing one or an id that is not one."""
    try:
        return JudgeConfig.objects.get(pk=int(config_id))
    except (JudgeConfig.DoesNotExist, ValueError):
        raise JudgeNotFoundError(f"No judge configuration {config_id}.") from None


def judge_config_and_benchmark_by_name(
    *, judge: str, benchmark: str
) -> tuple[JudgeConfig, Benchmark]:
    """Return the judge configuration (with its endpoint) and the benchmark of these names;
    JudgeRunChoiceNotFoundError for the first missing, the judge checked first."""
    config = JudgeConfig.objects.select_related("endpoint").filter(name=judge).first()
    if config is None:
        raise JudgeRunChoiceNotFoundError(field="judge", name=judge)
    found = Benchmark.objects.filter(name=benchmark).first()
    if found is None:
        raise JudgeRunChoiceNotFoundError(field="benchmark", name=benchmark)
    return config, found


def judge_config_prerequisites_missing(*, user: AbstractBaseUser) -> list[Prerequisite]:
    """Return what creating a judge needs first: an endpoint the user may choose."""
    endpoint = endpoint_prerequisite_missing(
        user=user,
        paid_action="Ask an admin to create the judge, or an offline fake endpoint "
        "(no address: it bills nobody, so researchers may use it).",
    )
    return [endpoint] if endpoint is not None else []
