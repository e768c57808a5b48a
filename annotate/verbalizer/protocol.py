"""The engine protocol of kind "verbalizer": one unit per prompt a system must answer.

Registered in settings.ENGINE_PROTOCOLS. A unit key names the system, the prompt and its
template version (``verb:s<system>:p<prompt>:<version>``), never the run, so a run started again
(or a new run of the same system on the set) skips the prompts the system has answered. The
reply is stored raw in ModelAnswer; parsing happens when the report is computed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils import timezone

from annotate.engine.bulk import rows_insert
from annotate.engine.client import FAKE_HINT, estimate_prompt_tokens
from annotate.engine.protocols import UnitEstimate, UnitFailed
from annotate.verbalizer.models import ModelAnswer, Prompt, SystemRun


def unit_key(system_id: int, prompt_id: int, template_version: str) -> str:
    return f"verb:s{system_id}:p{prompt_id}:{template_version}"


def _prompt_id(key: str) -> int:
    return int(key.split(":")[2][1:])


@dataclass(frozen=True)
class _Work:
    """One prompt's messages, and what the offline fake is told about its answer (the engine
    sends that to the fake only: annotate.engine.client.FAKE_HINT)."""

    messages: list[dict[str, str]]
    fake_hint: dict[str, Any]


class VerbalizerProtocol:
    """Answer each prompt of a SystemRun's set (in the run's modes) with the run's endpoint."""

    unit_name = "prompts"

    def _system_run(self, run) -> SystemRun:
        return SystemRun.objects.get(pk=run.params["system_run_id"])

    def title(self, run) -> str:
        """What the engine's run page calls this run: the system on its set."""
        found = (
            SystemRun.objects.select_related("system", "evaluation_set")
            .filter(pk=run.params["system_run_id"])
            .first()
        )
        return f"System {found.system.name} on set {found.evaluation_set.name}" if found else ""

    def origin(self, run) -> tuple[str, str] | str:
        """Where the run was started: its set's page, as (url, name); "" once the run is deleted."""
        found = (
            SystemRun.objects.filter(pk=run.params["system_run_id"])
            .values_list("evaluation_set_id", "evaluation_set__name")
            .first()
        )
        if found is None:
            return ""
        return reverse("verbalizer:set-detail", args=[found[0]]), f"Set {found[1]}"

    def results_url(self, run) -> str:
        """Where the run's answers are read: the set's report ("" once the run is deleted)."""
        set_id = (
            SystemRun.objects.filter(pk=run.params["system_run_id"])
            .values_list("evaluation_set_id", flat=True)
            .first()
        )
        # By URL name only: the report lives in evaluation, which annotate never imports.
        return reverse("verbalizer-reports:detail", args=[set_id]) if set_id else ""

    def units(self, run) -> list[str]:
        system_run = self._system_run(run)
        prompts = Prompt.objects.filter(
            evaluation_set_id=system_run.evaluation_set_id, mode__in=system_run.modes
        ).order_by("pk")
        return [
            unit_key(system_run.system_id, pk, version)
            for pk, version in prompts.values_list("pk", "template_version")
        ]

    def done_units(self, run, keys) -> set[str]:
        system_run = self._system_run(run)
        answered = ModelAnswer.objects.filter(
            system_id=system_run.system_id,
            prompt__evaluation_set_id=system_run.evaluation_set_id,
        ).values_list("prompt_id", "prompt__template_version")
        done = {unit_key(system_run.system_id, p, v) for p, v in answered}
        return done.intersection(keys)

    def load(self, run, keys) -> dict[str, _Work]:
        rows = Prompt.objects.filter(pk__in=[_prompt_id(k) for k in keys]).values_list(
            "pk", "text", "expected_word", "mapping__group", "item__text", "item__text_b"
        )
        work = {
            pk: _Work(
                messages=[{"role": "user", "content": text}],
                # The item by its text, not its id: ids differ between databases (PostgreSQL's
                # sequences are not rolled back), and the fake's reading of an item must not.
                fake_hint={"expected": expected, "group": group, "item": _item_key(a, b)},
            )
            for pk, text, expected, group, a, b in rows
        }
        return {key: work[_prompt_id(key)] for key in keys}

    def estimate(self, run, key, work) -> UnitEstimate:
        """One call a prompt, its messages counted as the engine counts a sent request."""
        return UnitEstimate(calls=1, prompt_tokens=estimate_prompt_tokens(work.messages))

    def execute(self, run, key, ctx) -> str:
        work = ctx.work
        call = ctx.chat(work.messages, purpose="verbalizer", params={FAKE_HINT: work.fake_hint})
        if call.status == "refused":
            raise UnitFailed(f"the model refused to answer ({call.error or 'content filter'})")
        return call.reply

    def store(self, run, results) -> None:
        """Insert the replies in one statement per batch; a reply already stored stays."""
        system_run = self._system_run(run)
        now = timezone.now()
        rows = [
            (_prompt_id(r.key), system_run.system_id, system_run.pk, r.value, r.calls[-1].pk, now)
            for r in results
            if r.finished and not r.failed and r.value is not None
        ]
        rows_insert(
            ModelAnswer,
            ["prompt", "system", "run", "reply", "engine_call", "created_at"],
            rows,
            on_conflict="DO NOTHING",
        )


def _item_key(text: str, text_b: str) -> str:
    """What identifies a classified text across mappings, modes and databases (the fake hint)."""
    return hashlib.sha256(f"{text}\n{text_b}".encode()).hexdigest()[:16]
