"""Choose a benchmark's instructions: all, a subset, chosen ids, a seeded sample."""

from __future__ import annotations

import random
from collections.abc import Sequence

from annotate.errors import FieldInputError
from annotate.models import Benchmark, Instruction, Subset


class SelectionError(FieldInputError):
    """The instructions asked for do not exist or the sample size is impossible; `field` names
    the choice at fault (subset, instruction_ids, sample or seed)."""


# A sample's seed is written into the run's description of its choice (200 characters for a
# judge run): more digits than this failed the insert on PostgreSQL.
SEED_MAX_DIGITS = 18


def instructions_select(
    *,
    benchmark: Benchmark,
    subset: str | None = None,
    external_ids: Sequence[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> tuple[list[int], str]:
    """Return the chosen instruction ids (sorted) and a description of the choice.

    All of the benchmark, or a subset (easy/hard), or the given external ids, optionally
    narrowed to a random sample of `sample` drawn with random.Random(seed).
    """
    instructions = Instruction.objects.filter(benchmark=benchmark)
    described = "all"
    if subset:
        if subset not in Subset.values:
            raise SelectionError(
                f"Unknown subset {subset!r}: expected easy or hard.", field="subset"
            )
        instructions = instructions.filter(subset=subset)
        described = f"subset {subset}"
    ids_by_external = dict(instructions.values_list("external_id", "id"))
    if external_ids:
        unknown = [item for item in external_ids if item not in ids_by_external]
        if unknown:
            raise SelectionError(
                f"No instruction {', '.join(unknown[:5])} in {benchmark.name}"
                + (f" ({described})." if subset else "."),
                field="instruction_ids",
            )
        chosen = sorted({ids_by_external[item] for item in external_ids})
        described = f"{len(chosen)} chosen" + (f" from subset {subset}" if subset else "")
    else:
        chosen = sorted(ids_by_external.values())
    if sample is not None:
        if len(str(abs(seed))) > SEED_MAX_DIGITS:
            raise SelectionError(f"Field 'seed': at most {SEED_MAX_DIGITS} digits.", field="seed")
        if not 1 <= sample <= len(chosen):
            raise SelectionError(
                f"Sample size must be between 1 and {len(chosen)}, not {sample}.", field="sample"
            )
        chosen = sorted(random.Random(seed).sample(chosen, sample))
        described = f"sample of {sample} (seed {seed}) from {described}"
    return chosen, described
