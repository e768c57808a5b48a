"""The judge as an engine protocol (run kind "judge"): one unit per conversation of a JudgeRun.

The engine makes, retries, stores and accounts every call; this class turns a conversation into
calls (evaluation.judges.conversation) and stores what they answered: each answer (JudgeCall and
its label) as soon as its call is saved, each conversation's end with its unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Count
from django.urls import reverse

from annotate.engine.client import estimate_prompt_tokens
from annotate.engine.errors import EngineRunBusyError, EngineRunError
from annotate.engine.models import EngineCall, EngineRun
from annotate.engine.protocols import RunContext, UnitEstimate, UnitFailed, UnitResult, UnitStopped
from annotate.engine.services import AgainWarning
from annotate.models import Response
from evaluation.errors import JudgeReplaceNotConfirmedError, JudgeRunBusyError, JudgeRunError
from evaluation.judges import prompting as p
from evaluation.judges.conversation import Answered, CallPolicy, ConversationWork, Failed, converse
from evaluation.models import JudgeConversation, JudgeRun
from evaluation.services import judge_runs

# The purpose of the engine calls: a call sent again after a failed one is told apart, so the
# run's retries count every call's, answered or not (evaluation.selectors.judge_runs).
PURPOSE = "judge"
PURPOSE_RETRY = "judge retry"


def _judge_run(run: EngineRun) -> JudgeRun:
    return judge_runs.judge_run_get(run_id=run.params["judge_run_id"])


def unit_key(response_id: int) -> str:
    return f"judge:r{response_id}"


class JudgeRunProtocol:
    """Run params: judge_run_id, prompt_version. The run's judge, protocol and prompt version are fixed on the
    JudgeRun, so a unit is keyed by the response it judges."""

    unit_name = "conversations"  # one per response judged, however many questions it asks

    def units(self, run: EngineRun) -> list[str]:
        """Longest conversations first: their questions are sequential, so one started last
        would stretch the run's tail while the other workers sit idle."""
        conversations = (
            JudgeConversation.objects.filter(run_id=run.params["judge_run_id"])
            .annotate(questions=Count("response__instruction__questions"))
            .order_by("-questions", "pk")
        )
        return [unit_key(r) for r in conversations.values_list("response_id", flat=True)]

    def on_start(self, run: EngineRun) -> None:
        judge_runs.judge_run_mark_started(_judge_run(run))

    def title(self, run: EngineRun) -> str:
        """What the engine's run page calls this run: the judge run, by its own number."""
        judge_run = (
            JudgeRun.objects.select_related("config", "benchmark")
            .filter(pk=run.params["judge_run_id"])
            .first()
        )
        if judge_run is None:
            return ""
        return f"Judge run #{judge_run.pk}: {judge_run.config.name} on {judge_run.benchmark.name}"

    def results_url(self, run: EngineRun) -> str:
        """Where the run's answers are read: its judge run's page ("" once that is deleted)."""
        judge_run_id = run.params["judge_run_id"]
        if not JudgeRun.objects.filter(pk=judge_run_id).exists():
            return ""
        return reverse("judge:run-detail", args=[judge_run_id])

    def unit_labels(self, run: EngineRun, keys: Sequence[str]) -> dict[str, str]:
        """What the pages call a conversation: its response's instruction id and system."""
        wanted = {
            int(key.split(":r", 1)[1]): key
            for key in keys
            if key.startswith("judge:r") and key[7:].isdigit()
        }
        rows = Response.objects.filter(pk__in=wanted).values_list(
            "pk", "instruction__external_id", "system__name"
        )
        return {wanted[pk]: f"{instruction} · {system}" for pk, instruction, system in rows}

    def load(self, run: EngineRun, keys: Sequence[str]) -> dict[str, ConversationWork]:
        judge_run = _judge_run(run)
        wanted = {int(key.split(":r", 1)[1]) for key in keys}
        conversations = judge_run.conversations.filter(response_id__in=wanted)
        response_of = dict(conversations.values_list("pk", "response_id"))
        works = judge_runs.judge_works(judge_run, conversations)
        return {unit_key(response_of[work.conversation_id]): work for work in works}

    def estimate(self, run: EngineRun, key: str, work: ConversationWork) -> UnitEstimate:
        """Count the calls still to make and their prompts, assuming a one-token answer each."""
        prompt = p.load_prompt(run.params["prompt_version"])
        missing = [q for q in work.questions if q[0] not in work.answered]
        if work.protocol == p.ALL_IN_ONE:
            text = p.all_in_one_turn(
                prompt,
                input_text=work.input_text,
                response=work.response_text,
                questions=[t for _, t in work.questions],
            )
            tokens = estimate_prompt_tokens([{"content": text}])
            return UnitEstimate(calls=1 if missing else 0, prompt_tokens=tokens if missing else 0)
        tokens, history = 0, []
        for index, (qid, text) in enumerate(work.questions):
            if work.protocol == p.INDEPENDENT or index == 0:
                turn = p.first_turn(
                    prompt, input_text=work.input_text, response=work.response_text, question=text
                )
                history = [] if work.protocol == p.INDEPENDENT else history
            else:
                turn = p.next_turn(prompt, question=text)
            history = [*history, {"content": turn}]
            if qid not in work.answered:
                tokens += estimate_prompt_tokens(history)
            history.append({"content": "YES"})
        return UnitEstimate(calls=len(missing), prompt_tokens=tokens)

    def execute(self, run: EngineRun, key: str, ctx: RunContext) -> Any:
        ends: list[Any] = []

        def emit(event: Any) -> None:
            if isinstance(event, Answered):
                event.engine_call.meta = event  # stored with the call by store_calls
            else:
                ends.append(event)

        params = run.params.get("request_params") or None
        policy = CallPolicy(
            chat=lambda messages, retry=False: ctx.chat(
                messages,
                purpose=PURPOSE_RETRY if retry else PURPOSE,
                params=params,
                allow_error=True,
            ),
            max_retries=ctx.max_retries,
            wait_before_retry=ctx.wait_before_retry,
        )
        converse(
            ctx.work,
            policy=policy,
            emit=emit,
            stop=ctx.stop_event,
            prompt_version=run.params["prompt_version"],
        )
        if not ends:
            raise UnitStopped  # stopped between questions: the conversation stays pending
        if isinstance(ends[0], Failed):
            raise UnitFailed(ends[0].error, value=ends[0])
        return ends[0]

    def store_calls(self, run: EngineRun, calls: Sequence[EngineCall]) -> None:
        answers = [call.meta for call in calls if getattr(call, "meta", None) is not None]
        if answers:
            judge_runs.judge_answers_store(_judge_run(run), answers)

    def store(self, run: EngineRun, results: Sequence[UnitResult]) -> None:
        judge_runs.judge_ends_store([result.value for result in results if result.value])

    def again_warning(self, run: EngineRun) -> AgainWarning:
        """What running it again replaces: labels a later run of its judge wrote on the
        questions it has left (`judge_run_again_warning`), empty when none."""
        return judge_runs.judge_run_again_warning(run=_judge_run(run))

    def check_again(self, run: EngineRun, *, replace: bool, seen: str | None = None) -> None:
        """Refuse Run again over those labels unless `replace` (for the labels `seen` says
        the page showed, when given), or while another run of its judge still writes them
        (`judge_run_check_start`), as the engine's pages and API understand a refusal
        (EngineRunError, field replace; EngineRunBusyError, 409)."""
        try:
            judge_runs.judge_run_check_start(run=_judge_run(run), replace=replace, seen=seen)
        except JudgeRunBusyError as error:
            raise EngineRunBusyError(str(error)) from None
        except JudgeReplaceNotConfirmedError as error:  # a page says it beside its box
            page = error.page_message
            status = error.http_status  # 409: the labels changed since they were shown
            raise EngineRunError(
                str(error), field=error.field, page_message=page, http_status=status
            ) from None
        except JudgeRunError as error:
            raise EngineRunError(str(error), field=error.field) from None

    def on_finish(self, run: EngineRun) -> None:
        judge_runs.judge_run_on_finish(run_id=run.params["judge_run_id"], engine_run=run)
