"""Pages of annotation work: the annotator's dashboard and task page, researchers' projects.

Views parse input, call one selector or service, and render; errors become HTTP in annotate.http.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from annotate.errors import NotFoundError, NoWorkError, ProjectSetupError, SubmissionError
from annotate.forms import BatchForm, ProjectForm
from annotate.http import csv_download, exports_limited, page_errors, work_limited
from annotate.models import Annotator, Project
from annotate.roles import (
    ADMIN,
    ADMINS_ONLY,
    RESEARCHER,
    RESEARCHERS_ONLY,
    is_admin,
    require_role,
)
from annotate.selectors import work as work_selectors
from annotate.services import assignments as assignment_services
from annotate.services import projects as project_services
from annotate.services.submissions import Outcome, assignment_submit

RESERVED_FIELDS = {"csrfmiddlewaretoken", "active_seconds"}


def _back_to_task(*, assignment_id: int) -> tuple[str, str]:
    return reverse("work:assignment", args=[assignment_id]), "Back to the task"


def _annotator(request: HttpRequest) -> Annotator:
    """Return the annotator of the logged-in user; 403 for users without the annotator role."""
    return assignment_services.annotator_of_annotator_user(user=request.user)


def _require_admin(request: HttpRequest) -> None:
    require_role(request.user, ADMIN, message=ADMINS_ONLY)


@never_cache
@login_required
@page_errors
def dashboard(request: HttpRequest) -> HttpResponse:
    annotator = _annotator(request)
    # A blocked person is told so here, and offered no project: start_next refuses the claim.
    blocked = assignment_services.annotator_blocked(annotator)
    projects = []
    if not blocked:
        projects = work_selectors.dashboard_for_annotator(annotator=annotator, now=timezone.now())
    context = {
        "blocked": assignment_services.BLOCKED_FROM_NEW_WORK if blocked else "",
        "projects": projects,
        "recent": work_selectors.recent_assignments(annotator=annotator),
    }
    return render(request, "annotate/work/dashboard.html", context)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
@work_limited(  # a GET with the submit's token claims too
    outcome="No task was claimed.",
    methods=("GET", "POST"),
    back=lambda **_: (reverse("work:dashboard"), "Your tasks"),
)
@page_errors
def start_next(request: HttpRequest, project_id: int) -> HttpResponse:
    """Claim the annotator's next task of the project (or give back their live claim).

    POST (the "Start next task" buttons) redirects to the task. GET is where an accepted submit
    sends the annotator when the project continues to the next task: it claims and shows the
    task page in the same response, so "submit and continue" stays two requests (the submit
    itself stores the answers only, as the peer's does). A GET claims only with the token the
    submit signed for this user and project: a link from another site cannot make anyone claim.
    """
    if request.method == "GET" and not _next_token_valid(request, project_id):
        return redirect("work:dashboard")
    annotator = _annotator(request)
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFoundError("No such project.")
    try:
        assignment = assignment_services.assignment_claim_next(
            annotator=annotator, project=project, now=timezone.now()
        )
    except NoWorkError as error:
        if request.method == "GET":
            return redirect("work:project-done", project_id=project.id)
        # A project never offered to them and never theirs is missing, as on its All-done page.
        if work_selectors.project_hidden_from(annotator=annotator, project=project):
            raise NotFoundError("No such project.") from None
        messages.info(request, str(error))
        return redirect("work:dashboard")
    if request.method == "GET":
        page = work_selectors.task_page_get(assignment_id=assignment.id, user=request.user)
        # The form posts to the task's own address, which task.js also puts in the address bar.
        action = reverse("work:assignment", args=[assignment.id])
        return render(request, "annotate/work/task.html", _task_context(page, form_action=action))
    return redirect("work:assignment", assignment_id=assignment.id)


# The token of "continue to the next task": who and which project, signed with the site's key.
# It lasts a working day, so a tab left open after a submit still continues.
_NEXT_SALT = "annotate.work.next"
_NEXT_MAX_AGE = 12 * 3600


def _next_task_url(request: HttpRequest, project: Project) -> str:
    token = signing.TimestampSigner(salt=_NEXT_SALT).sign(f"{request.user.pk}.{project.pk}")
    return f"{reverse('work:start-next', args=[project.pk])}?after={token}"


def _next_token_valid(request: HttpRequest, project_id: int) -> bool:
    token = request.GET.get("after", "")
    try:
        value = signing.TimestampSigner(salt=_NEXT_SALT).unsign(token, max_age=_NEXT_MAX_AGE)
    except signing.BadSignature:
        return False
    return value == f"{request.user.pk}.{project_id}"


@never_cache
@login_required
@work_limited(outcome="Nothing was submitted.", back=_back_to_task)
@page_errors
def assignment_page(request: HttpRequest, assignment_id: int) -> HttpResponse:
    if request.method == "POST":
        return _submit(request, assignment_id)
    page = work_selectors.task_page_get(assignment_id=assignment_id, user=request.user)
    return render(request, "annotate/work/task.html", _task_context(page))


def _task_context(page, **extra) -> dict:
    standing = work_selectors.project_standing(assignment=page.assignment, now=timezone.now())
    return {"page": page, "standing": standing, **extra}


def _submit(request: HttpRequest, assignment_id: int) -> HttpResponse:
    answers = {
        key: values[0] if len(values) == 1 else values
        for key, values in request.POST.lists()
        if key not in RESERVED_FIELDS
    }
    try:
        # The service finds the assignment of this user's annotator under its row lock (a
        # NotFoundError otherwise): no read of the assignment or the annotator beforehand.
        result = assignment_submit(
            assignment_id=assignment_id,
            user=request.user,
            answers=answers,
            active_seconds=request.POST.get("active_seconds", 0),
            now=timezone.now(),
        )
    except SubmissionError as error:
        return _task_page_with_error(request, assignment_id, answers, error)
    if result.questions_next:
        return redirect("work:assignment", assignment_id=assignment_id)
    messages.success(request, _OUTCOME_MESSAGES[result.outcome])
    project = result.assignment.task.batch.project
    if result.accepted and project.continue_to_next:
        return redirect(_next_task_url(request, project))
    return redirect("work:dashboard")


@never_cache
@login_required
@page_errors
def project_done(request: HttpRequest, project_id: int) -> HttpResponse:
    annotator = _annotator(request)
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFoundError("No such project.")
    rows = work_selectors.dashboard_for_annotator(annotator=annotator, now=timezone.now())
    this = next((row for row in rows if row.project.pk == project.pk), None)
    # Not offered to them (no active batch) and never theirs: missing, as for any other id.
    if this is None and not work_selectors.annotator_worked_in(
        annotator=annotator, project=project
    ):
        raise NotFoundError("No such project.")
    submitted = this.submitted if this else 0
    # As on the dashboard, a blocked person is told so and offered no task, here or in another
    # project: start_next refuses the claim, and the block ended their claims.
    if assignment_services.annotator_blocked(annotator):
        context = {
            "project": project,
            "submitted": submitted,
            "blocked": assignment_services.BLOCKED_FROM_NEW_WORK,
        }
        return render(request, "annotate/work/all_done.html", context)
    context = {
        "project": project,
        "submitted": submitted,
        "left_here": (this.available if this else 0),
        # Opened by hand (a bookmark, the address typed) while a claimed task is in progress.
        "live_here": this.live_assignment if this else None,
        # The same lapsed claims the dashboard offers (work_selectors.lapsed_unsubmitted).
        "lapsed_here": this.lapsed_assignments if this else [],
        "elsewhere": [
            row
            for row in rows
            if row.project.pk != project.pk
            and (row.available or row.live_assignment or row.lapsed_assignments)
        ],
    }
    return render(request, "annotate/work/all_done.html", context)


_OUTCOME_MESSAGES = {
    Outcome.ACCEPTED: "Submitted. Thank you!",
    Outcome.UNCHANGED: "Already submitted; nothing changed.",
    Outcome.LATE: "Submitted after the allotted time and the task was full: your answers are "
    "kept and shown to the researchers, but not counted.",
}


def _task_page_with_error(
    request: HttpRequest, assignment_id: int, answers: dict, error: SubmissionError
) -> HttpResponse:
    text_answers = {key: value for key, value in answers.items() if isinstance(value, str)}
    page = work_selectors.task_page_get(
        assignment_id=assignment_id, user=request.user, answers=text_answers
    )
    said, missing = work_selectors.submission_refusal(page=page, error=error)
    context = _task_context(page, error=said, missing=missing)
    return render(request, "annotate/work/task.html", context, status=error.http_status)


@login_required
@require_POST
@work_limited(outcome="The task was not returned.", back=_back_to_task)
@page_errors
def assignment_return(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = work_selectors.assignment_get_for_annotator(
        assignment_id=assignment_id, user=request.user
    )
    assignment_services.assignment_return(
        assignment_id=assignment.id, annotator=assignment.annotator, now=timezone.now()
    )
    messages.info(request, "Task returned.")
    return redirect("work:dashboard")


# --- Researchers and admins ----------------------------------------------------------------


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    projects = work_selectors.projects_for_researcher(user=request.user)
    context = {"projects": projects, "can_create": is_admin(request.user)}
    return render(request, "annotate/work/project_list.html", context)


@login_required
def project_create(request: HttpRequest) -> HttpResponse:
    _require_admin(request)
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = _project_create_from(form, request)
        except ProjectSetupError as error:
            form.add_error(None, str(error))
            context = {"form": form}
            return render(request, "annotate/work/project_form.html", context, status=400)
        messages.success(request, f"Project '{project.name}' created.")
        return redirect("work:project-detail", project_id=project.id)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotate/work/project_form.html", {"form": form}, status=status)


def _project_create_from(form: ProjectForm, request: HttpRequest) -> Project:
    data = form.cleaned_data
    return project_services.project_create(
        name=data["name"],
        benchmark=data["benchmark"],
        systems=list(data["systems"]),
        selection=form.instruction_selection(),
        mode=data["mode"],
        assignments_per_task=data["assignments_per_task"],
        allotted_minutes=data["allotted_minutes"],
        guidelines=data["guidelines"],
        researchers=list(data["researchers"]),
        continue_to_next=data["continue_to_next"],
        practice=data["practice"],
        created_by=request.user,
    )


@login_required
@page_errors
def project_detail(request: HttpRequest, project_id: int) -> HttpResponse:
    project = work_selectors.project_get_for_researcher(project_id=project_id, user=request.user)
    context = {
        "project": project,
        "progress": work_selectors.project_progress(project=project, now=timezone.now()),
        "batch_form": BatchForm(initial={"name": f"Batch {project.batches.count() + 1}"}),
        "can_change": is_admin(request.user),
    }
    return render(request, "annotate/work/project_detail.html", context)


@login_required
@require_POST
@page_errors
def batch_create(request: HttpRequest, project_id: int) -> HttpResponse:
    _require_admin(request)
    project = work_selectors.project_get_for_researcher(project_id=project_id, user=request.user)
    form = BatchForm(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("work:project-detail", project_id=project.id)
    batch = project_services.batch_create(
        project=project, name=form.cleaned_data["name"], selection=form.instruction_selection()
    )
    messages.success(request, f"Batch '{batch.name}' created with {batch.tasks.count()} tasks.")
    return redirect("work:project-detail", project_id=project.id)


@login_required
@exports_limited(
    back=lambda project_id: (reverse("work:project-detail", args=[project_id]), "The project")
)
@page_errors
def labels_csv(request: HttpRequest, project_id: int) -> StreamingHttpResponse:
    project = work_selectors.project_get_for_researcher(project_id=project_id, user=request.user)
    return csv_download(
        work_selectors.project_label_rows(project=project),
        filename=f"project-{project.id}-labels.csv",
    )
