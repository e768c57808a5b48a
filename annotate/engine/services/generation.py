"""Writes of generation: bind a system to an endpoint, create a generation run, retire a
replaced response, export a system's responses."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from decimal import Decimal
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from annotate.engine.errors import EngineRunError
from annotate.engine.generation import DEFAULT_TEMPLATE, generation_templates
from annotate.engine.models import Endpoint, EngineCall, EngineRun
from annotate.engine.services.runs import (
    engine_run_check_may_start,
    engine_run_check_work,
    engine_run_create,
)
from annotate.models import Benchmark, Response, System
from annotate.selectors.instructions import instructions_select


@transaction.atomic
def generating_system_get_or_create(*, name: str, endpoint: Endpoint) -> System:
    """Return the system bound to `endpoint`, creating it on first use.

    A system with imported responses, or bound to another endpoint, is refused: a system's
    responses are imported or generated, never silently mixed.
    """
    name = name.strip()
    if not name:
        raise EngineRunError("Field 'system': the system name is empty.", field="system")
    system, _ = System.objects.select_for_update().get_or_create(name=name)
    if system.generation_endpoint_id is None:
        if system.responses.filter(generation_key="").exists():
            raise EngineRunError(
                f"System {name!r} has imported responses: generate under a new system name.",
                field="system",
            )
        system.generation_endpoint = endpoint
        system.save(update_fields=["generation_endpoint"])
    elif system.generation_endpoint_id != endpoint.pk:
        raise EngineRunError(
            f"System {name!r} generates through endpoint {system.generation_endpoint.name!r}, "
            f"not {endpoint.name!r}: use that endpoint or a new system name.",
            field="system",
        )
    return system


@transaction.atomic
def generation_run_create(
    *,
    benchmark: Benchmark,
    systems: Iterable[System],
    endpoint: Endpoint,
    user: AbstractBaseUser | None = None,
    subset: str | None = None,
    instruction_ids: Sequence[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    template: str = DEFAULT_TEMPLATE,
    replace: bool = False,
    spending_cap_usd: Decimal | None = None,
) -> EngineRun:
    """Create a run generating the systems' responses to the chosen instructions.

    Every system must generate through `endpoint`. Instructions already answered are skipped
    when the run starts (with `replace`, those answered with other settings are regenerated);
    when every one is answered already the run is refused (EngineNothingToDoError) and nothing
    is kept, so a rerun records no empty run.
    """
    engine_run_check_may_start(user=user, endpoint=endpoint)
    systems = list(systems)
    if not systems:
        raise EngineRunError("Choose at least one system.")
    for system in systems:
        if system.generation_endpoint_id != endpoint.pk:
            raise EngineRunError(
                f"System {system.name!r} does not generate through endpoint {endpoint.name!r}."
            )
    if template not in generation_templates():
        raise EngineRunError(f"Unknown generation template {template!r}.")
    chosen, described = instructions_select(
        benchmark=benchmark, subset=subset, external_ids=instruction_ids, sample=sample, seed=seed
    )
    names = ", ".join(system.name for system in systems)
    run = engine_run_create(
        kind="generation",
        endpoint=endpoint,
        params={
            "benchmark_id": benchmark.pk,
            "system_ids": [system.pk for system in systems],
            "instruction_ids": chosen,
            "template": template,
            "replace": replace,
            "selection": described,
        },
        created_by=user,
        spending_cap_usd=spending_cap_usd,
        description=f"Generate {names} on {benchmark.name} ({described})",
    )
    engine_run_check_work(
        run=run,
        nothing_to_do=lambda units: (
            f"Nothing to do: {_responses(units)} of {names} to {benchmark.name} ({described}) "
            f"{'is' if units == 1 else 'are'} there already; no run was made."
        ),
    )
    return run


def _responses(count: int) -> str:
    return "the response" if count == 1 else f"the {count} responses"


def generation_response_retire(*, response: Response, run: EngineRun) -> None:
    """Move a replaced response, with its labels, to the system's retired version for this run.

    The labels stay on the text they judged; the new text starts with none.
    """
    system = response.system
    retired, _ = System.objects.get_or_create(
        name=f"{system.name} (replaced by run {run.pk})"[:200], defaults={"retired_from": system}
    )
    Response.objects.filter(pk=response.pk).update(system=retired)


def responses_export(*, benchmark: Benchmark, system: System, path: str | Path) -> int:
    """Write the system's responses as JSON Lines (id, output, status, usage); return the count.

    The file imports back with import_responses (which reads id and output).
    """
    rows = (
        Response.objects.filter(instruction__benchmark=benchmark, system=system)
        .order_by("instruction__position", "instruction__pk")
        .values_list("instruction__external_id", "text", "generated_by_id")
    )
    calls = {
        call.pk: call
        for call in EngineCall.objects.filter(
            pk__in=[row[2] for row in rows if row[2] is not None]
        ).only("pk", "status", "prompt_tokens", "completion_tokens", "usage_estimated", "run_id")
    }
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for external_id, text, call_id in rows:
            call = calls.get(call_id)
            row = {"id": external_id, "output": text, "status": "imported"}
            if call is not None:
                row.update(
                    status=call.status,
                    run=call.run_id,
                    usage={
                        "prompt_tokens": call.prompt_tokens,
                        "completion_tokens": call.completion_tokens,
                        "estimated": call.usage_estimated,
                    },
                )
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count
