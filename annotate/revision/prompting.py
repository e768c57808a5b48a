"""Load the versioned prompt files of the KIWI methods and fill them in.

A prompt file has `key: value` header lines (source, version), then a `=== system ===` and a
`=== user ===` section. `{name}` placeholders are replaced by plain string replacement, so braces
in the filled-in text (an answer quoting code, say) are never interpreted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from annotate.engine.client import JsonText, fill_text

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
SYSTEM_MARK, USER_MARK = "=== system ===", "=== user ==="


@dataclass(frozen=True)
class Prompt:
    version: str
    source: str
    system: str
    user: str

    def messages(self, **values: str) -> list[dict[str, str]]:
        """Return chat messages with every `{name}` replaced by its value."""
        messages = [{"role": "user", "content": fill(self.user, values)}]
        if self.system:
            messages.insert(0, {"role": "system", "content": fill(self.system, values)})
        return messages


def fill(template: str, values: dict[str, str]) -> str:
    """Replace each `{name}` by its value, in the values' order. With a JsonText among the
    values (the shared examples of a few-shot prompt), the result is one too: the request
    that sends it is not encoded as JSON again from scratch."""
    if any(isinstance(value, JsonText) for value in values.values()):
        return JsonText.fill(template, values)
    return fill_text(template, values)


@cache
def prompt_load(path: Path) -> Prompt:
    """Read one prompt file (cached: files change only with a new version name)."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(SYSTEM_MARK + "\n")
    system, _, user = rest.partition(USER_MARK + "\n")
    header = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    return Prompt(header["version"], header["source"], system.strip("\n"), user.rstrip("\n"))


def prompt_file(directory: Path, name: str) -> Prompt:
    """Return the prompt `name` (a file name without .txt) of a prompt directory."""
    return prompt_load(directory / f"{name}.txt")


def revision_prompt(name: str) -> Prompt:
    """Return one of the appendix A.1 prompts: initial, info-summary, info-answer, stylistic."""
    return prompt_load(PROMPT_DIR / f"{name}-v1.txt")


def passages_block(passages: list[tuple[str, str]]) -> str:
    """Format (title, text) passages as the A.1 prompts list them."""
    return "\n".join(f"Paper title: {title}\nPassage: {text}" for title, text in passages)
