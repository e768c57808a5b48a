"""The `official` judge protocol: the official InFoBench evaluation.py, byte for byte.

Source: github.com/qinyiwei/InfoBench, evaluation.py at commit 557fba0 (MIT License, Copyright (c)
2023 qinyiwei); a copy is in ../shared/reference/infobench/. What the script does and this
protocol repeats (docs/reports.md lists it next to the default protocol's deviations):

- Messages: the first user turn is SYS_MSG, the input (when non-empty), the response and the
  first question (prompts/infobench_official.txt); each later turn is the bare question plus a
  newline; every reply goes back into the history as an assistant turn.
- Request: model, messages and temperature only (no max_tokens), in that order; the temperature
  as the script's default writes it (`0`, not `0.0`): `request_temperature`. Both are request
  overrides of the engine's body (evaluation/judges/request_params.py).
- Parsing (`parse_official`): a reply starting with "yes" or "no" in any case (so "Not sure" is
  NO); else YES when the capitals "YES" occur and "NO" does not, NO the other way round; else
  unparseable (UNKNOWN). Nothing is stripped first, so " Yes" and "" are unparseable.
- After an unparseable reply the script stops the conversation: the later questions are never
  asked (`continues_after`); they are stored as not asked, never as labels.
- Any failed call is retried with the same messages (an HTTP 400 too), and so is a reply whose
  content is null, after the script has put that null reply into the history as an assistant
  turn (it appends the reply before reading it); an empty string is an answer, unparseable. The
  engine retries 429, 5xx and timeouts itself; the protocol retries the rest
  (conversation.call_like_the_script through ctx.chat(allow_error=True)). The script retries
  for ever, 20 s apart; the app at most the endpoint's max_retries times with the engine's
  back-off, then fails the conversation (a rerun asks again).
"""

from __future__ import annotations

from evaluation.judges.parsing import NO, UNKNOWN, YES
from evaluation.judges.prompting import OFFICIAL

OFFICIAL_PROMPT_VERSION = "infobench_official"


def parse_official(generation: str) -> int:
    """Return YES, NO or UNKNOWN for one reply, exactly as evaluation.py reads it."""
    lowered = generation.lower()
    if lowered.startswith("yes") or lowered.startswith("no"):
        return YES if lowered.startswith("yes") else NO
    if "YES" in generation and "NO" not in generation:
        return YES
    if "YES" not in generation and "NO" in generation:
        return NO
    return UNKNOWN


def continues_after(label: int) -> bool:
    """Whether the script asks the next question after an answer read as `label`."""
    return label != UNKNOWN


def request_temperature(protocol: str, temperature: float) -> float | int:
    """Return the temperature as a protocol sends it: the script's default is the integer 0
    (JSON `0`, not `0.0`), so a whole-number temperature goes out as an integer."""
    if protocol == OFFICIAL and float(temperature).is_integer():
        return int(temperature)
    return temperature


def prompt_version_for(protocol: str, requested: str | None, default: str) -> str:
    """Return the prompt version a run of `protocol` uses: the official one for `official`."""
    if protocol == OFFICIAL:
        return OFFICIAL_PROMPT_VERSION
    return requested or default
