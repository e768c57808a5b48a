"""Generation: systems answer a benchmark's instructions through their endpoint (run kind
"generation"). One unit = one (instruction, system) pair, keyed by its content; its result is
an ordinary Response row that records the call that produced it."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from django.db import transaction
from django.urls import reverse

from annotate.engine.bulk import rows_insert
from annotate.engine.client import estimate_prompt_tokens
from annotate.engine.models import Endpoint, EngineRun
from annotate.engine.protocols import RunContext, UnitEstimate, UnitFailed, UnitResult
from annotate.models import Benchmark, Instruction, Response, System

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
DEFAULT_TEMPLATE = "generation_infobench_v1"
_PLACEHOLDER = re.compile(r"\{(instruction|input)\}")


@dataclass(frozen=True)
class GenerationTemplate:
    version: str
    with_input: str
    no_input: str

    def render(self, *, instruction: str, input_text: str) -> str:
        """Fill the template in one pass, so braces in the instruction stay as typed."""
        values = {"instruction": instruction, "input": input_text}
        section = self.with_input if input_text else self.no_input
        return _PLACEHOLDER.sub(lambda match: values[match.group(1)], section)


@cache
def generation_template(version: str = DEFAULT_TEMPLATE) -> GenerationTemplate:
    """Return the template stored in prompts/<version>.txt (see its header for the format)."""
    if not re.fullmatch(r"generation_[A-Za-z0-9_.-]+", version):
        raise ValueError(f"Bad generation template name {version!r}.")
    path = PROMPTS_DIR / f"{version}.txt"
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        header = re.fullmatch(r"\[(\w+)\]", line.strip())
        if header:
            current = sections.setdefault(header.group(1), [])
        elif current is not None:
            current.append(line)
    text = {name: "\n".join(lines).strip("\n") for name, lines in sections.items()}
    return GenerationTemplate(version, text["with_input"], text["no_input"])


def generation_templates() -> list[str]:
    return sorted(path.stem for path in PROMPTS_DIR.glob("generation_*.txt"))


def endpoint_fingerprint(endpoint: Endpoint, template: str) -> str:
    """Return a short hash of what decides a reply: model, address, decoding, template."""
    content = {
        "base_url": endpoint.base_url,
        "model": endpoint.model,
        "temperature": endpoint.temperature,
        "max_tokens": endpoint.max_tokens,
        "top_p": endpoint.top_p,
        "seed": endpoint.seed,
        "stop": endpoint.stop,
        "template": template,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def unit_key(instruction_id: int, system_id: int, fingerprint: str) -> str:
    return f"gen:i{instruction_id}:s{system_id}:{fingerprint}"


def parse_unit_key(key: str) -> tuple[int, int]:
    _, instruction, system, _ = key.split(":")
    return int(instruction[1:]), int(system[1:])


class GenerationProtocol:
    """Run params: instruction_ids, system_ids, template, replace (bool)."""

    unit_name = "responses"  # one unit: one system's response to one instruction

    def units(self, run: EngineRun) -> list[str]:
        fingerprint = endpoint_fingerprint(run.endpoint, run.params["template"])
        return [
            unit_key(instruction_id, system_id, fingerprint)
            for system_id in run.params["system_ids"]
            for instruction_id in run.params["instruction_ids"]
        ]

    def results_url(self, run: EngineRun) -> str:
        """Where the generated responses are read: the benchmark's page, whose instructions
        each show every system's response ("" once the benchmark is deleted)."""
        benchmark_id = run.params.get("benchmark_id")
        if benchmark_id is None or not Benchmark.objects.filter(pk=benchmark_id).exists():
            return ""
        return reverse("annotate:benchmark-detail", args=[benchmark_id])

    def unit_labels(self, run: EngineRun, keys: Sequence[str]) -> dict[str, str]:
        """What the pages call a unit: its instruction's id and its system ("task_2 · gpt4o")."""
        pairs = {}
        for key in keys:
            try:
                pairs[key] = parse_unit_key(key)
            except ValueError:  # not a generation key: the page shows the key itself
                continue
        instructions = dict(
            Instruction.objects.filter(pk__in={i for i, _ in pairs.values()}).values_list(
                "pk", "external_id"
            )
        )
        systems = dict(
            System.objects.filter(pk__in={s for _, s in pairs.values()}).values_list("pk", "name")
        )
        return {
            key: f"{instructions.get(i, f'instruction {i}')} · {systems.get(s, f'system {s}')}"
            for key, (i, s) in pairs.items()
        }

    def done_units(self, run: EngineRun, keys: Sequence[str]) -> set[str]:
        """A unit is done when its system has a response to its instruction: the same content
        (same key), or any generated response unless the run asks to replace older ones."""
        wanted = {parse_unit_key(key): key for key in keys}
        rows = Response.objects.filter(
            instruction_id__in={i for i, _ in wanted}, system_id__in={s for _, s in wanted}
        ).values_list("instruction_id", "system_id", "generation_key")
        replace = run.params.get("replace", False)
        return {
            wanted[(i, s)]
            for i, s, key in rows
            if (i, s) in wanted and (key == wanted[(i, s)] or not replace)
        }

    def load(self, run: EngineRun, keys: Sequence[str]) -> dict[str, list[dict[str, str]]]:
        """Return each unit's chat messages, read in one query."""
        template = generation_template(run.params["template"])
        wanted = [parse_unit_key(key) for key in keys]
        texts = dict(
            (pk, (instruction, input_text))
            for pk, instruction, input_text in Instruction.objects.filter(
                pk__in={i for i, _ in wanted}
            ).values_list("pk", "text", "input_text")
        )
        return {
            key: [
                {
                    "role": "user",
                    "content": template.render(instruction=texts[i][0], input_text=texts[i][1]),
                }
            ]
            for key, (i, _) in zip(keys, wanted, strict=True)
        }

    def estimate(self, run: EngineRun, key: str, work: Any) -> UnitEstimate:
        return UnitEstimate(calls=1, prompt_tokens=estimate_prompt_tokens(work))

    def execute(self, run: EngineRun, key: str, ctx: RunContext) -> None:
        call = ctx.chat(ctx.work, purpose="generate")
        if not call.answered:  # refused: a failure is never stored as a response
            raise UnitFailed(call.error)

    def store(self, run: EngineRun, results: Sequence[UnitResult]) -> None:
        """Write one Response per finished unit; a replaced response is kept apart with its
        labels (see generation_response_retire), never given the new text."""
        from annotate.engine.services.generation import generation_response_retire

        pairs = {parse_unit_key(r.key): r for r in results if not r.failed}
        existing = {
            (row.instruction_id, row.system_id): row
            for row in Response.objects.filter(
                instruction_id__in={i for i, _ in pairs}, system_id__in={s for _, s in pairs}
            )
        }
        new: list[tuple] = []
        with transaction.atomic():
            for (instruction_id, system_id), result in pairs.items():
                call = result.calls[-1]
                old = existing.get((instruction_id, system_id))
                if old is not None:
                    if old.generation_key == result.key:
                        continue  # a duplicate delivery: the first one stays
                    generation_response_retire(response=old, run=run)
                new.append((instruction_id, system_id, call.reply, result.key, call.pk))
            rows_insert(
                Response,
                ["instruction", "system", "text", "generation_key", "generated_by"],
                new,
                on_conflict="(instruction_id, system_id) DO NOTHING",
            )


def systems_for(ids: Sequence[int]) -> list[System]:
    return list(System.objects.filter(pk__in=ids))
