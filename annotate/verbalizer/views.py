"""Pages of verbalizer manipulation: datasets and mappings (researchers), sets and human studies
(researchers), and the annotators' answering page (keys 1/2). Reports live in
evaluation.verbalizer.views.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from annotate.engine.models import Endpoint
from annotate.engine.pages import run_form_submit
from annotate.errors import AnnotateError, ConflictError, NotFoundError
from annotate.http import (
    error_page,
    form_refusal,
    page_errors,
    refused_upload,
    uploaded_path,
    uploads_limited,
    work_limited,
)
from annotate.models import Annotator
from annotate.roles import (
    ADMIN,
    RESEARCHER,
    RESEARCHERS_ONLY,
    is_admin,
    require_role,
)
from annotate.selectors.identities import identity_scope
from annotate.services.assignments import (
    BLOCKED_FROM_NEW_WORK,
    annotator_block_check,
    annotator_blocked,
    annotator_of_annotator_user,
)
from annotate.services.files import upload_size_problem
from annotate.verbalizer import engine_seam
from annotate.verbalizer.forms import (
    DatasetForm,
    ItemsForm,
    MappingForm,
    RunForm,
    SetForm,
    StudyForm,
)
from annotate.verbalizer.models import ClassificationDataset, EvaluationSet, HumanStudy, Mapping
from annotate.verbalizer.selectors import (
    PROMPT_FILTERS,
    human_answers_waiting_for_kind,
    human_study_progress,
    items_per_dataset,
    rejected_answers_of,
    set_prompt_filter_options,
    set_prompts,
    study_prompts_by_id,
)
from annotate.verbalizer.services import catalogue, humans, runs
from annotate.verbalizer.services.imports import classification_import
from annotate.verbalizer.services.sets import evaluation_set_create


def _require_researcher(request: HttpRequest) -> None:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)


def _annotator(request: HttpRequest) -> Annotator:
    return annotator_of_annotator_user(user=request.user)


@login_required
@uploads_limited
@page_errors
def overview(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    dataset_form, mapping_form = DatasetForm(prefix="d"), MappingForm(prefix="m")
    names = list(ClassificationDataset.objects.order_by("name").values_list("name", flat=True))
    with_items = list(
        ClassificationDataset.objects.filter(items__isnull=False)
        .distinct()
        .order_by("name")
        .values_list("name", flat=True)
    )
    # The import form offers first the dataset just added, else one still empty: a filled
    # dataset takes no more items.
    empty = [name for name in names if name not in with_items]
    chosen = request.GET.get("dataset")
    initial = chosen if chosen in names else next(iter(empty), None)
    items_form = ItemsForm(prefix="i", datasets=names, initial={"dataset": initial})
    set_form = SetForm(prefix="s", datasets=with_items)
    if request.method == "POST":
        if "d-name" in request.POST:
            dataset_form = DatasetForm(request.POST, prefix="d")
            if dataset_form.is_valid() and _created(dataset_form, catalogue.dataset_create):
                name = dataset_form.cleaned_data["name"]
                messages.success(request, f"Dataset {name} added: import its items below.")
                query = urlencode({"dataset": name})
                return redirect(f"{reverse('verbalizer:overview')}?{query}#add-items")
        elif "i-dataset" in request.POST:
            items_form = ItemsForm(request.POST, request.FILES, prefix="i", datasets=names)
            if items_form.is_valid() and _items_import(request, items_form):
                return redirect("verbalizer:overview")
        elif "s-name" in request.POST:
            set_form = SetForm(request.POST, prefix="s", datasets=with_items)
            if set_form.is_valid():
                created = _set_create(request, set_form)
                if created is not None:
                    return redirect("verbalizer:set-detail", set_id=created.pk)
        else:
            mapping_form = MappingForm(request.POST, prefix="m")
            if mapping_form.is_valid() and _created(mapping_form, catalogue.mapping_create):
                messages.success(request, "Mapping added.")
                return redirect("verbalizer:overview")
    context = {
        "datasets": ClassificationDataset.objects.annotate(n_items=Count("items")),
        "mappings": Mapping.objects.all(),
        "sets": _with_items_used(EvaluationSet.objects.annotate(n_prompts=Count("prompts"))),
        "dataset_form": dataset_form,
        "mapping_form": mapping_form,
        "items_form": items_form,
        "set_form": set_form,
    }
    bound = [f for f in (dataset_form, mapping_form, items_form, set_form) if f.is_bound]
    status = 400 if any(f.errors for f in bound) else 200
    # The forms are far down the page: say at its top that one was refused, and where.
    refused = {
        dataset_form: ("add-dataset", "The dataset was not added"),
        mapping_form: ("add-mapping", "The mapping was not added"),
        items_form: ("add-items", "The items were not imported"),
        set_form: ("add-set", "The set was not made"),
    }
    context["refused"] = next((refused[f] for f in bound if f.errors), None)
    return render(request, "verbalizer/overview.html", context, status=status)


def _with_items_used(evaluation_sets) -> list[EvaluationSet]:
    """The sets, each with `items_used`: the items it holds per dataset beside those asked."""
    evaluation_sets = list(evaluation_sets)
    used = items_per_dataset(evaluation_sets=evaluation_sets)
    for evaluation_set in evaluation_sets:
        evaluation_set.items_used = used[evaluation_set.pk]
    return evaluation_sets


def _created(form, service) -> bool:
    """Call `service` with the form's values; a refusal is shown on the form, values kept."""
    try:
        service(**form.cleaned_data)
    except AnnotateError as error:
        form_refusal(form, error)
        return False
    return True


def _items_import(request: HttpRequest, form: ItemsForm) -> bool:
    """Import the uploaded file into the dataset as `import_classification` does: every row or
    none, an error naming the file's line and field. Files are a dataset's dev split (SST-2's
    is 872 rows), read in the request; the upload limit applies."""
    upload = form.cleaned_data["upload"]
    if too_large := upload_size_problem(upload.size):
        form.add_error("upload", too_large)
        return False
    with uploaded_path(upload) as path:
        try:
            summary = classification_import(
                path=path, dataset=form.cleaned_data["dataset"], fmt=form.cleaned_data["format"]
            )
        except AnnotateError as error:
            form.add_error(None, refused_upload(error, path=path, upload=upload))
            return False
    messages.success(request, summary.message.replace(path, upload.name))
    return True


def _set_create(request: HttpRequest, form: SetForm) -> EvaluationSet | None:
    data = form.cleaned_data
    try:
        summary = evaluation_set_create(
            name=data["name"].strip(), datasets=data["datasets"], items=data["items"],
            seed=data["seed"], modes=data["modes"], created_by=request.user,
        )  # fmt: skip
    except AnnotateError as error:
        form.add_error(None, str(error))
        return None
    messages.success(request, f"Set {summary.evaluation_set.name} made.")
    return summary.evaluation_set


@login_required
@page_errors
def set_detail(request: HttpRequest, set_id: int) -> HttpResponse:
    _require_researcher(request)
    evaluation_set = get_object_or_404(EvaluationSet, pk=set_id)
    if "study-open" in request.POST:
        return _study_open_set(request, evaluation_set)
    # Two forms on one page: each its own prefix, so ids and labels never collide.
    form = StudyForm(
        request.POST if "study-name" in request.POST else None,
        prefix="study", evaluation_set=evaluation_set,
    )  # fmt: skip
    run_form = RunForm(
        request.POST if "run-system" in request.POST else None, prefix="run",
        evaluation_set=evaluation_set, endpoints=Endpoint.objects.order_by("name"),
    )  # fmt: skip
    # A refusal (a paid endpoint for a researcher, say) is shown on the form; nothing written.
    sent = run_form_submit(
        request,
        run_form,
        estimate=lambda: runs.verbalizer_run_estimate(
            user=request.user, **_run_arguments(request, evaluation_set, run_form)
        ),
        start=lambda: _run_start(request, evaluation_set, run_form),
        endpoint=lambda: engine_seam.engine_endpoint_get(name=run_form.cleaned_data["endpoint"]),
        sent=run_form.is_bound,
    )
    if sent.started is not None:
        # Its page shows the progress as it goes, and links the report once there are answers.
        messages.success(request, f"Started engine run #{sent.started.engine_run_id}.")
        return redirect("engine:run-detail", engine_run_id=sent.started.engine_run_id)
    if form.is_bound and form.is_valid() and _study_create(request, evaluation_set, form):
        messages.success(request, "Study published to annotators.")
        return redirect("verbalizer:set-detail", set_id=set_id)
    admin = is_admin(request.user)
    context = {
        "set": _with_items_used([evaluation_set])[0],
        "n_prompts": evaluation_set.prompts.count(),
        "runs": evaluation_set.system_runs.select_related("system", "engine_run").annotate(
            n_answers=Count("answers")
        ),
        "studies": evaluation_set.human_studies.annotate(
            n_prompts=Count("prompts", distinct=True), n_answers=Count("answers", distinct=True)
        ).prefetch_related("publications"),
        "waiting": human_answers_waiting_for_kind(evaluation_set=evaluation_set),
        "can_publish": admin,
        "is_admin": admin,
        "form": form,
        "run_form": run_form,
        "estimate": sent.estimate,
        "confirm": sent.confirm,
    }
    status = sent.status if run_form.errors else 400 if form.errors else 200
    return sent.page(render(request, "verbalizer/set_detail.html", context, status=status))


def _study_open_set(request: HttpRequest, evaluation_set: EvaluationSet) -> HttpResponse:
    """Close a study of the set to annotators, or open it again ("study-open": 0 or 1)."""
    study_id = request.POST.get("study", "")
    study = HumanStudy.objects.filter(
        pk=int(study_id) if study_id.isdigit() else None, evaluation_set=evaluation_set
    ).first()
    if study is None:
        raise NotFoundError("No such study in this set.")
    active = request.POST["study-open"] == "1"
    try:
        humans.human_study_open_set(study=study, active=active)
    except ConflictError as error:
        back = (reverse("verbalizer:set-detail", args=[evaluation_set.pk]), "Back to the set")
        return error_page(request, error, back=back)
    said = "open to annotators again" if active else "closed: annotators no longer see it"
    messages.success(request, f"Study {study.name} {said}.")
    return redirect(reverse("verbalizer:set-detail", args=[evaluation_set.pk]) + "#studies")


PROMPTS_PER_PAGE = 50


@login_required
@require_GET
@page_errors
def set_prompts_page(request: HttpRequest, set_id: int) -> HttpResponse:
    """The set's rendered prompts, word for word as models and people read them, filterable by
    dataset, group, mapping and mode: what a run or a study will ask, before it asks."""
    _require_researcher(request)
    evaluation_set = get_object_or_404(EvaluationSet, pk=set_id)
    options = set_prompt_filter_options(evaluation_set=evaluation_set)
    chosen = {key: _offered(request.GET[key], options[key]) for key in PROMPT_FILTERS
              if request.GET.get(key)}  # fmt: skip
    prompts = set_prompts(evaluation_set=evaluation_set, chosen=chosen)
    page = Paginator(prompts, PROMPTS_PER_PAGE).get_page(request.GET.get("page"))
    selects = [(key, key.capitalize(), options[key], chosen.get(key)) for key in PROMPT_FILTERS]
    context = {"set": evaluation_set, "page": page, "selects": selects, "chosen": chosen}
    return render(request, "verbalizer/prompts.html", context)


@login_required
@require_GET
@page_errors
def study_detail(request: HttpRequest, human_study_id: int) -> HttpResponse:
    """A human study for its researchers: settings, progress per channel and group, each
    prompt's answers (all, or those still wanted: `?needing=1`) and who answered."""
    _require_researcher(request)
    study = get_object_or_404(
        HumanStudy.objects.select_related("evaluation_set", "created_by"), pk=human_study_id
    )
    publications = list(study.publications.order_by("pk"))
    progress = human_study_progress(
        study=study, platforms=[p.platform for p in publications],
        scope=identity_scope(user=request.user),
    )  # fmt: skip
    needing = request.GET.get("needing") == "1"
    ids = progress.needing if needing else progress.prompt_ids
    page = Paginator(ids, PROMPTS_PER_PAGE).get_page(request.GET.get("page"))
    keys = [channel.key for channel in progress.channels]
    rows = [
        (prompt, [progress.counts.get(prompt.pk, {}).get(key, 0) for key in keys])
        for prompt in study_prompts_by_id(prompt_ids=list(page.object_list))
    ]
    context = {
        "study": study, "set": study.evaluation_set, "publications": publications,
        "progress": progress, "page": page, "rows": rows, "needing": needing,
        "can_publish": is_admin(request.user),
    }  # fmt: skip
    return render(request, "verbalizer/study_detail.html", context)


def _offered(asked: str, offered: list[tuple[str, str]]) -> str:
    """The set's own spelling of a value asked for in the URL ("Golden" is "golden"); a value
    the set does not have is kept, so the page finds nothing for it and says so."""
    return next((value for value, _ in offered if value.casefold() == asked.casefold()), asked)


def _study_create(request: HttpRequest, evaluation_set: EvaluationSet, form: StudyForm) -> bool:
    """Publish the slice the form asks for; a refusal is shown on the form, values kept."""
    data = form.cleaned_data
    try:
        humans.human_study_create(
            evaluation_set=evaluation_set, name=data["name"], datasets=data["datasets"],
            mappings=data["mappings"], modes=data["modes"],
            items_per_dataset=data["items_per_dataset"],
            answers_per_prompt=data["answers_per_prompt"],
            completion_url=data["completion_url"], completion_code=data["completion_code"],
            created_by=request.user,
        )  # fmt: skip
    except AnnotateError as error:
        form_refusal(form, error)
        return False
    return True


def _run_arguments(request: HttpRequest, evaluation_set: EvaluationSet, form: RunForm) -> dict:
    data = form.cleaned_data
    return {
        "evaluation_set": evaluation_set, "system": data["system"], "endpoint": data["endpoint"],
        "modes": data["modes"], "model_size_b": data["model_size_b"],
        "spending_cap_usd": data["spending_cap_usd"], "created_by": request.user,
    }  # fmt: skip


def _run_start(request: HttpRequest, evaluation_set: EvaluationSet, form: RunForm):
    """Create and start a run; the engine refuses paid endpoints to anyone but an admin."""
    return runs.verbalizer_run_launch(
        user=request.user, **_run_arguments(request, evaluation_set, form)
    )


def saved_message(word: str) -> str:
    """What the page after an answer says, in-house and on the crowd pages alike."""
    return f"Saved: you answered “{word}” to the last prompt."


# An answer or a change counts on the annotator's work rate, per user (scope "annotator-work",
# as a task's submit on its page or the API).
_answers_limited = work_limited(
    outcome="Nothing was saved.",
    back=lambda human_study_id: (
        reverse("verbalizer:work-next", args=[human_study_id]),
        "Go on with this study",
    ),
)


# The annotator's own work (as annotate.work_views): never kept by a shared computer's back
# button or a proxy for the next person.
@never_cache
@login_required
@require_GET
@page_errors
def work_list(request: HttpRequest) -> HttpResponse:
    annotator = _annotator(request)
    context = {"rejected": rejected_answers_of(annotator=annotator)}
    # A blocked person is told so here, and offered no study: work_next refuses its prompts.
    if annotator_blocked(annotator):
        context["blocked"] = BLOCKED_FROM_NEW_WORK
    else:
        context["studies"] = humans.human_work_list(annotator=annotator)
    return render(request, "verbalizer/work_list.html", context)


@never_cache
@login_required
@require_GET
@page_errors
def work_next(request: HttpRequest, human_study_id: int) -> HttpResponse:
    annotator = _annotator(request)
    study = humans.human_study_active(human_study_id=human_study_id)
    if study is None:
        raise NotFoundError("No such study.")
    annotator_block_check(annotator)  # no prompt to answer that the answer's submit refuses
    # With the change of the last answer (a slip of the key) wherever it may still be made.
    prompt, done, total, change = humans.human_work_page(
        study=study, annotator=annotator, now=timezone.now()
    )
    context = {"study": study, "prompt": prompt, "done": done, "total": total, "change": change}
    context["change_minutes"] = int(humans.CHANGE_WINDOW.total_seconds() // 60)
    if prompt is None:  # finished here: where their work goes on, if anywhere
        context["elsewhere"] = [
            (other, progress)
            for other, progress in humans.human_work_list(annotator=annotator)
            if progress.left and other.pk != study.pk
        ]
    return render(request, "verbalizer/work_item.html", context)


@never_cache
@login_required
@require_POST
@_answers_limited
@page_errors
def work_answer(request: HttpRequest, human_study_id: int) -> HttpResponse:
    annotator = _annotator(request)
    study = HumanStudy.objects.filter(pk=human_study_id, active=True).first()
    if study is None:
        raise NotFoundError("No such study.")
    try:
        prompt_id, key = int(request.POST["prompt"]), int(request.POST["key"])
        seconds = float(request.POST.get("seconds") or "nan")
    except (KeyError, ValueError):
        raise humans.HumanStudyError("An answer needs the prompt and key 1 or 2.") from None
    try:
        answer = humans.human_work_answer_submit(
            study=study, prompt_id=prompt_id, annotator=annotator, key=key,
            seconds=None if seconds != seconds else seconds,
        )  # fmt: skip
    except ConflictError as error:  # answered already, or by enough people: on with the study
        back = (reverse("verbalizer:work-next", args=[study.pk]), "Go on with this study")
        return error_page(request, error, back=back)
    # The next prompt replaces the page at once: say the key pressed was taken, and as what.
    messages.success(request, saved_message(answer.word))
    return redirect("verbalizer:work-next", human_study_id=study.pk)


@never_cache
@login_required
@require_POST
@_answers_limited
@page_errors
def work_answer_change(request: HttpRequest, human_study_id: int) -> HttpResponse:
    """Change the annotator's last answer (a slip of the key), from the next prompt's page."""
    annotator = _annotator(request)
    study = HumanStudy.objects.filter(pk=human_study_id).first()
    if study is None:
        raise NotFoundError("No such study.")
    try:
        prompt_id, key = int(request.POST["prompt"]), int(request.POST["key"])
    except (KeyError, ValueError):
        raise humans.HumanStudyError("A change needs the prompt and key 1 or 2.") from None
    try:
        answer = humans.human_answer_change(
            study=study, annotator=annotator, prompt_id=prompt_id, key=key, now=timezone.now()
        )
    except ConflictError as error:
        back = (reverse("verbalizer:work-next", args=[study.pk]), "Go on with this study")
        return error_page(request, error, back=back)
    messages.success(
        request,
        f"Changed: you answered “{answer.word}” to the last prompt "
        f"(first “{answer.changed_from or answer.word}”, kept in the record).",
    )
    return redirect("verbalizer:work-next", human_study_id=study.pk)
