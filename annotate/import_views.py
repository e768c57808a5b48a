"""The upload page for researchers: queue an import, watch it finish."""

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from annotate.errors import AnnotateError
from annotate.http import uploads_limited
from annotate.models import DECIDED_KINDS, Benchmark, ImportJob, ImportKind, ImportStatus
from annotate.roles import ADMIN, RESEARCHER, RESEARCHERS_ONLY, require_role
from annotate.services.import_jobs import import_job_create, import_jobs_fail_stale
from annotate.throttling import polled


class ImportForm(forms.Form):
    kind = forms.ChoiceField(choices=ImportKind.choices, label="What the file holds")
    benchmark_name = forms.CharField(
        max_length=200, label="Benchmark", widget=forms.TextInput(attrs={"list": "benchmarks"})
    )
    system_name = forms.CharField(
        max_length=200, required=False, label="System (responses, evaluation JSON Lines)"
    )
    annotator_name = forms.CharField(
        max_length=200, required=False, label="Annotator (evaluation JSON Lines)"
    )
    annotator_kind = forms.ChoiceField(
        choices=[("", "— as in the file —"), *((k.value, k.label) for k in DECIDED_KINDS)],
        required=False,
        label="Kind of new annotators",
    )
    # An empty file reaches the service, whose refusal names it (the field's own message did not).
    upload = forms.FileField(label="File", allow_empty_file=True)


@login_required
@uploads_limited
def import_list(request: HttpRequest) -> HttpResponse:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    import_jobs_fail_stale(now=timezone.now())  # also without a beat (the embedded default)
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            job = import_job_create(user=request.user, **form.cleaned_data)
        except AnnotateError as error:
            form.add_error(None, str(error))
        else:
            return redirect("annotate:import-detail", job_id=job.pk)
    context = {
        "form": form,
        "jobs": ImportJob.objects.select_related("created_by")[:50],
        "benchmarks": Benchmark.objects.values_list("name", flat=True),
    }
    return render(request, "annotate/import_list.html", context, status=400 if form.errors else 200)


@polled  # reloaded every few seconds while the work runs
@login_required
def import_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    import_jobs_fail_stale(now=timezone.now())
    job = get_object_or_404(ImportJob, pk=job_id)
    running = job.status in (ImportStatus.QUEUED, ImportStatus.RUNNING)
    return render(request, "annotate/import_detail.html", {"job": job, "running": running})
