"""The annotators page: researchers see each person's work and agreement and decide their kind."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import Exists, OuterRef
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from annotate.crowd.platforms import platform_label
from annotate.errors import AnnotateError, FieldInputError, PermissionDeniedError
from annotate.http import page_errors
from annotate.models import Annotator, AnnotatorKind
from annotate.revision.models import Rerating, RevisionSession
from annotate.roles import ADMIN, RESEARCHER, RESEARCHERS_ONLY, is_admin, require_role
from annotate.selectors.identities import identity_scope
from annotate.selectors.work import project_get_for_researcher, projects_for_researcher
from annotate.services.annotators import annotator_kind_set, annotator_project_kind_set
from annotate.services.assignments import annotator_for_user
from annotate.verbalizer.selectors import human_answers_left_out_by_kind
from evaluation.selectors.annotator_overview import (
    annotator_override_locked,
    annotator_rows,
    annotators_kind_locked,
)

KIND_FILTERS = [
    ("", "every kind"),
    (AnnotatorKind.UNDECIDED, "not decided yet"),
    (AnnotatorKind.EXPERT, "experts"),
    (AnnotatorKind.CROWD, "crowd workers"),
]


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


@login_required
def annotator_list(request: HttpRequest) -> HttpResponse:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    project_id = _int_or_none(request.GET.get("project"))
    kind = request.GET.get("kind", "")
    kind = kind if kind in dict(KIND_FILTERS) else ""
    rows = annotator_rows(user=request.user, project_id=project_id, kind=kind)
    context = {
        "rows": rows,
        "projects": projects_for_researcher(user=request.user),
        "project_id": project_id,
        "kind": kind,
        "kind_filters": KIND_FILTERS,
        # A KIWI-only row has no Annotator: not decided either.
        "undecided": sum(
            1 for r in rows if not r.annotator or r.annotator.kind == AnnotatorKind.UNDECIDED
        ),
        "blocked": sum(1 for r in rows if r.block),
        # An admin unblocks here too: a web account blocked as a crowd worker and made an
        # expert since is on no publication's review page any more.
        "is_admin": is_admin(request.user),
        "answers_waiting": sum(r.answers_waiting for r in rows),
        "person_kinds": [
            (AnnotatorKind.UNDECIDED.value, "Not decided yet"),
            (AnnotatorKind.EXPERT.value, "Expert"),
            (AnnotatorKind.CROWD.value, "Crowd worker"),
        ],
    }
    return render(request, "evaluation/annotator_list.html", context)


@login_required
@require_POST
@page_errors
def annotator_kind_update(request: HttpRequest, annotator_id: int) -> HttpResponse:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    annotator = get_object_or_404(Annotator, pk=annotator_id)
    project = request.POST.get("project", "")
    project_id = _int_or_none(project)
    kind = request.POST.get("kind", "")
    scope = identity_scope(user=request.user)  # a hidden crowd worker by pseudonym, as listed
    name = scope.name_of(annotator)
    try:
        if project and project_id is None:  # not read as "no project": that sets the own kind
            raise FieldInputError(
                f"project: expected a project id, found {project!r}; nothing was changed.",
                field="project",
            )
        if project_id is None:
            if annotators_kind_locked(user=request.user, annotator_ids=[annotator.pk]):
                raise PermissionDeniedError(
                    f"{name} has work outside your projects, so only an admin can change their "
                    "kind; you can override it in a project of yours (“In this project”)."
                )
            left_out = human_answers_left_out_by_kind(annotator=annotator, kind=kind)
            if left_out and not request.POST.get("confirmed"):  # asked first: nothing changes
                return _kind_confirm(request, annotator, name=name, kind=kind, left_out=left_out)
            _own_kind_set(request, annotator, name=name, kind=kind)
        else:
            project = project_get_for_researcher(project_id=project_id, user=request.user)
            if annotator_override_locked(
                user=request.user, project=project, annotator_id=annotator.pk
            ):
                raise PermissionDeniedError(
                    f"{name} has work on the benchmark of {project.name} outside your projects, "
                    "and a project's kind counts in that benchmark's whole report, so only an "
                    "admin can set it there."
                )
            annotator_project_kind_set(project=project, annotator=annotator, kind=kind, scope=scope)
            shown = dict(AnnotatorKind.choices).get(kind, "their own kind")
            messages.success(request, f"{name} in {project.name}: {shown}.")
    except AnnotateError as error:
        messages.error(request, str(error))
    return redirect(_list_url(request))


def _own_kind_set(request: HttpRequest, annotator: Annotator, *, name: str, kind: str) -> None:
    """Set the person's own kind and say so, and which of their answers no longer count."""
    change = annotator_kind_set(annotator=annotator, kind=kind, now=timezone.now())
    message = f"{name} is now: {annotator.get_kind_display()}."
    if change.answers_left_out:
        message += " " + _left_out_text(annotator, change.answers_left_out, now=True)
        messages.warning(request, message)
    else:
        messages.success(request, message)


def _list_url(request: HttpRequest) -> str:
    """The filtered list the form was sent from: only our own path, its filters as they were."""
    query = urlencode(
        {
            key: request.POST[key]
            for key in ("filter_project", "filter_kind")
            if request.POST.get(key)
        }
    ).replace("filter_", "")
    return reverse("annotators:list") + (f"?{query}" if query else "")


def _left_out_text(annotator: Annotator, count: int, *, now: bool) -> str:
    """Say which verbalizer answers of the person a kind's change leaves out, and why: their
    new channel (in-house for an expert, their platform's crowd for a crowd worker) has every
    answer per prompt of their prompts already."""
    if annotator.kind == AnnotatorKind.EXPERT:
        channel = "in-house"
    elif annotator.platform:
        channel = f"{platform_label(annotator.platform)} crowd"
    else:
        channel = "web accounts' crowd"
    answers = f"their {count} verbalizer answer{'s' if count != 1 else ''}"
    verb = "no longer count" if now else "will no longer count"
    prompts = "these prompts are" if count != 1 else "this prompt is"
    return (
        f"{answers[0].upper()}{answers[1:]} {verb} in any result: the {channel} answers of "
        f"{prompts} full (each waits there until a place frees up)."
    )


def _kind_confirm(
    request: HttpRequest, annotator: Annotator, *, name: str, kind: str, left_out: int
) -> HttpResponse:
    """Ask before a kind's change that leaves counted verbalizer answers out; nothing changed."""
    preview = Annotator(kind=kind, platform=annotator.platform)
    context = {
        "name": name,
        "annotator": annotator,
        "kind": kind,
        "kind_phrase": "an expert" if kind == AnnotatorKind.EXPERT else "a crowd worker",
        "left_out": left_out,
        "warning": _left_out_text(preview, left_out, now=False),
        "filters": {key: request.POST.get(key, "") for key in ("filter_project", "filter_kind")},
        "back": _list_url(request),
    }
    return render(request, "evaluation/annotator_kind_confirm.html", context)


@login_required
@require_POST
@page_errors
def kiwi_user_kind_update(request: HttpRequest, user_id: int) -> HttpResponse:
    """Decide the kind of someone who has only steered KIWI sessions or re-rated KIWI turns:
    they have no Annotator yet (neither makes one), so it is made as their first labelling
    would make it, and the kind is set as on any other row."""
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    kiwi_users = User.objects.filter(
        Exists(RevisionSession.objects.filter(annotator=OuterRef("pk")))
        | Exists(Rerating.objects.filter(annotator=OuterRef("pk")))
    )
    user = get_object_or_404(kiwi_users, pk=user_id)
    annotator = annotator_for_user(user=user)
    return annotator_kind_update(request, annotator.pk)
