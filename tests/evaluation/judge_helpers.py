"""Shared set-up of the judge tests: a small benchmark and a judge pointed at the stub."""

from __future__ import annotations

from annotate.models import Instruction
from evaluation.services.judge_configs import judge_config_create
from tests.factories import (
    BenchmarkFactory,
    InstructionFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
)


def make_benchmark(*, questions_per_instruction=(3, 2), systems=("sys-a",), inputs=None):
    """Create instructions with 1..n questions and one response per system; return them."""
    benchmark = BenchmarkFactory()
    systems = [SystemFactory(name=name) for name in systems]
    instructions = []
    for index, count in enumerate(questions_per_instruction):
        instruction = InstructionFactory(
            benchmark=benchmark,
            external_id=f"task_{index + 1}",
            position=index,
            input_text=(inputs[index] if inputs else ""),
        )
        for position in range(1, count + 1):
            QuestionFactory(
                instruction=instruction,
                position=position,
                text=f"{instruction.external_id} question {position}?",
            )
        for system in systems:
            ResponseFactory(
                instruction=instruction, system=system, text=f"{system.name} answer {index + 1}"
            )
        instructions.append(instruction)
    return benchmark, systems, instructions


def make_judge(base_url: str = "", *, name="stub-judge", backend="openai", **fields):
    fields.setdefault("api_key_env", "")
    fields.setdefault("max_retries", 3)
    # Tests measure behaviour, not the default 200 RPM pace.
    fields.setdefault("requests_per_minute", 1_000_000)
    fields.setdefault("tokens_per_minute", 100_000_000)
    return judge_config_create(name=name, backend=backend, base_url=base_url, **fields)


def question_count(instructions: list[Instruction]) -> int:
    return sum(instruction.questions.count() for instruction in instructions)
