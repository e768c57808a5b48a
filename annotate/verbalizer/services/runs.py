"""Run a system over an evaluation set through the model engine (kind "verbalizer")."""

from __future__ import annotations

import math

from django.db import transaction

from annotate.errors import FieldInputError
from annotate.models import System
from annotate.selectors.names import names_there_are
from annotate.verbalizer import engine_seam
from annotate.verbalizer.models import EvaluationSet, Mode, ModelAnswer, SystemRun


class RunSetupError(FieldInputError):
    """A run cannot be started as asked (unknown set or endpoint, bad modes); `field` names
    the page's and the API's input at fault."""


@transaction.atomic
def verbalizer_run_create(
    *,
    evaluation_set: EvaluationSet,
    system: str,
    endpoint: str,
    modes: list[str] | None = None,
    model_size_b: float | None = None,
    spending_cap_usd=None,
    created_by=None,
) -> SystemRun:
    """Create the SystemRun and its engine run; start it with `verbalizer_run_start`.

    `created_by` must be allowed to start it: a paid endpoint is an admin's (None: the
    console). A system that answered some prompts of the set already (an earlier run) only gets
    the rest; one that answered them all is refused (EngineNothingToDoError) and nothing is kept.
    """
    endpoint_row = engine_seam.engine_endpoint_get(name=endpoint)
    if endpoint_row is None:
        known = names_there_are(engine_seam.engine_endpoints(), what="endpoints")
        raise RunSetupError(
            f"--endpoint: no engine endpoint named {endpoint!r} ({known})", field="endpoint"
        )
    # Who may spend first, as the judge's and generation's runs: a researcher asking for a paid
    # endpoint hears that (403), not that its API key is unset in this process.
    engine_seam.engine_run_check_user(user=created_by, endpoint=endpoint_row)
    modes = modes or list(evaluation_set.modes)
    unknown = [m for m in modes if m not in evaluation_set.modes or m not in Mode.values]
    if unknown:
        raise RunSetupError(
            f"--modes: the set has modes {', '.join(evaluation_set.modes)}; "
            f"not {', '.join(unknown)}",
            field="modes",
        )
    if not system.strip():
        raise RunSetupError("--system: a name is required", field="system")
    if model_size_b is not None and not 0 <= model_size_b < math.inf:  # NaN fails too
        raise RunSetupError(
            f"--size: billions of parameters, 0 or more; found {model_size_b}",
            field="model_size_b",
        )
    _same_model_check(evaluation_set=evaluation_set, system=system.strip(), endpoint=endpoint_row)
    system_row, _ = System.objects.get_or_create(name=system.strip())
    system_run = SystemRun.objects.create(
        evaluation_set=evaluation_set, system=system_row, endpoint_name=endpoint,
        modes=modes, model_size_b=model_size_b, created_by=created_by,
    )  # fmt: skip
    run = engine_seam.engine_run_new(
        endpoint=endpoint_row,
        params={"system_run_id": system_run.pk, "set": evaluation_set.name, "system": system},
        created_by=created_by,
        spending_cap_usd=spending_cap_usd,
        # The Model runs list names a run by its description alone.
        description=f"Verbalizer: system {system_row.name} on set {evaluation_set.name}",
    )
    system_run.engine_run_id = run.pk
    system_run.save(update_fields=["engine_run_id"])
    engine_seam.engine_run_refuse_if_done(
        run=run,
        nothing_to_do=lambda units: (
            f"Nothing to do: {system_row.name} answered "
            f"{'the prompt' if units == 1 else f'the {units} prompts'} of set "
            f"{evaluation_set.name} ({', '.join(modes)}) already; no run was made."
        ),
    )
    return system_run


def _same_model_check(*, evaluation_set: EvaluationSet, system: str, endpoint) -> None:
    """Refuse a run whose endpoint serves another model than the one that answered the set's
    prompts for this system already: the run asks only the prompts left, so the system's rows
    would pool two models' replies under one name."""
    answered_through = (
        ModelAnswer.objects.filter(run__evaluation_set=evaluation_set, system__name=system)
        .exclude(run__endpoint_name=endpoint.name)
        .values_list("run__endpoint_name", flat=True)
        .distinct()
    )
    for name in answered_through:
        earlier = engine_seam.engine_endpoint_get(name=name)
        if earlier is not None and earlier.model == endpoint.model:
            continue
        served = f" (model {earlier.model})" if earlier is not None else ""
        raise RunSetupError(
            f"--system: {system} answered prompts of set {evaluation_set.name} through endpoint "
            f"{name}{served}; {endpoint.name} serves model {endpoint.model}, and this run would "
            "only ask the prompts left, mixing two models under one name: give it a system name "
            "of its own",
            field="system",
        )


def verbalizer_run_estimate(*, user=None, **create_arguments):
    """What `verbalizer_run_create(**create_arguments)` would call and cost (a RunEstimate);
    nothing is kept. Refused to a researcher on a paid endpoint, as starting is."""
    return engine_seam.engine_run_estimate(
        create=lambda: verbalizer_run_create(**create_arguments).engine_run, user=user
    )


@transaction.atomic
def verbalizer_run_launch(*, user=None, **create_arguments) -> SystemRun:
    """Create the run and start it (the set page's Start and the API's): it runs once this
    transaction commits; a refusal (a paid endpoint for a researcher) keeps nothing."""
    system_run = verbalizer_run_create(**create_arguments)
    verbalizer_run_start(system_run=system_run, user=user)
    return system_run


def verbalizer_run_start(*, system_run: SystemRun, user=None) -> None:
    """Start the run in the background (after commit); the engine checks who may spend money."""
    from annotate.engine.models import EngineRun

    engine_seam.engine_run_background(
        run=EngineRun.objects.get(pk=system_run.engine_run_id), user=user
    )


def verbalizer_run_execute(*, system_run: SystemRun, on_progress=None):
    """Do the run in this process and return the engine run (for commands and benchmarks)."""
    from annotate.engine.models import EngineRun

    return engine_seam.engine_run_foreground(
        run=EngineRun.objects.get(pk=system_run.engine_run_id), on_progress=on_progress
    )


def evaluation_set_get(*, name: str) -> EvaluationSet:
    evaluation_set = EvaluationSet.objects.filter(name=name).first()
    if evaluation_set is None:
        known = names_there_are(EvaluationSet.objects.all(), what="evaluation sets")
        raise RunSetupError(f"--set: no evaluation set named {name!r} ({known})", field="set")
    return evaluation_set
