"""Pages of the annotation side. Views parse input, call a selector or service, render."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from annotate.errors import NotFoundError
from annotate.roles import ADMIN, ANNOTATOR, has_role, is_researcher
from annotate.selectors import benchmarks as benchmark_selectors


def _require_researcher(request: HttpRequest) -> None:
    if not is_researcher(request.user):
        raise Http404


@login_required
def home(request: HttpRequest) -> HttpResponse:
    context = {
        "is_researcher": is_researcher(request.user),
        "is_annotator": has_role(request.user, ANNOTATOR),
        "is_admin": has_role(request.user, ADMIN),
    }
    return render(request, "annotate/home.html", context)


@login_required
def benchmark_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    benchmarks = benchmark_selectors.benchmark_list_with_counts()
    return render(request, "annotate/benchmark_list.html", {"benchmarks": benchmarks})


@login_required
def benchmark_detail(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    _require_researcher(request)
    try:
        benchmark = benchmark_selectors.benchmark_get(benchmark_id=benchmark_id)
    except NotFoundError:
        raise Http404 from None
    context = {
        "benchmark": benchmark,
        "summary": benchmark_selectors.benchmark_summary(benchmark=benchmark),
        "instructions": benchmark_selectors.benchmark_instructions(benchmark=benchmark),
    }
    return render(request, "annotate/benchmark_detail.html", context)


@login_required
def instruction_detail(
    request: HttpRequest, benchmark_id: int, instruction_id: int
) -> HttpResponse:
    _require_researcher(request)
    try:
        benchmark = benchmark_selectors.benchmark_get(benchmark_id=benchmark_id)
        instruction = benchmark_selectors.instruction_with_work(
            benchmark=benchmark, instruction_id=instruction_id
        )
    except NotFoundError:
        raise Http404 from None
    context = {"benchmark": benchmark, "instruction": instruction}
    return render(request, "annotate/instruction_detail.html", context)
