"""Turn an (input, response, questions) triple into chat messages for each judge protocol.

The prompt text lives in versioned files under prompts/ (see infobench_v1.txt for the format);
the version name is stored with every call and label the judge produces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
DEFAULT_PROMPT_VERSION = "infobench_v1"

MULTI_TURN = "multi_turn"
ALL_IN_ONE = "all_in_one"
INDEPENDENT = "independent"
OFFICIAL = "official"  # evaluation.py byte for byte: evaluation/judges/official.py
PROTOCOLS = (MULTI_TURN, ALL_IN_ONE, INDEPENDENT, OFFICIAL)

_SECTIONS = ("rules", "first_turn", "first_turn_no_input", "next_turn")
_ALL_IN_ONE_SECTIONS = ("all_in_one", "all_in_one_no_input")  # optional: not in every version
_PLACEHOLDER = re.compile(r"\{(rules|input|response|question|questions)\}")

Message = dict[str, str]


@dataclass(frozen=True)
class PromptTemplate:
    version: str
    sections: dict[str, str]

    def supports(self, protocol: str) -> bool:
        """Whether this prompt has the sections a protocol needs (all-in-one ones are optional)."""
        return protocol != ALL_IN_ONE or all(name in self.sections for name in _ALL_IN_ONE_SECTIONS)

    def render(self, section: str, **values: str) -> str:
        """Fill the placeholders of a section in one pass, so braces in the values stay as typed."""
        values = {"rules": self.sections["rules"], **values}
        return _PLACEHOLDER.sub(lambda match: values[match.group(1)], self.sections[section])


def _parse_sections(text: str, *, path: Path) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        header = re.fullmatch(r"\[(\w+)\]", line.strip())
        if header:
            current = sections.setdefault(header.group(1), [])
            continue
        if current is not None:
            current.append(line)
    missing = [name for name in _SECTIONS if name not in sections]
    if missing:
        raise ValueError(f"{path}: missing prompt sections {', '.join(missing)}")
    result = {}
    for name, lines in sections.items():
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        result[name] = "".join(line + "\n" for line in lines)
    result["rules"] = result["rules"].removesuffix("\n")
    return result


@cache
def load_prompt(version: str = DEFAULT_PROMPT_VERSION) -> PromptTemplate:
    """Return the prompt template stored in prompts/<version>.txt."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", version):
        raise ValueError(f"Bad prompt version name {version!r}.")
    path = PROMPTS_DIR / f"{version}.txt"
    return PromptTemplate(version, _parse_sections(path.read_text(encoding="utf-8"), path=path))


def available_prompt_versions() -> list[str]:
    return sorted(path.stem for path in PROMPTS_DIR.glob("*.txt"))


def first_turn(prompt: PromptTemplate, *, input_text: str, response: str, question: str) -> str:
    """Return the opening user turn: rules, Input (only when non-empty), Generated Text, question."""
    if input_text:
        return prompt.render("first_turn", input=input_text, response=response, question=question)
    return prompt.render("first_turn_no_input", response=response, question=question)


def next_turn(prompt: PromptTemplate, *, question: str) -> str:
    return prompt.render("next_turn", question=question)


def all_in_one_turn(
    prompt: PromptTemplate, *, input_text: str, response: str, questions: list[str]
) -> str:
    """Return one user turn asking every question, numbered from 1."""
    missing = [name for name in _ALL_IN_ONE_SECTIONS if name not in prompt.sections]
    if missing:
        raise ValueError(
            f"Prompt {prompt.version} has no all-in-one sections ({', '.join(missing)})."
        )
    numbered = "\n".join(f"{number}. {text}" for number, text in enumerate(questions, 1))
    if input_text:
        return prompt.render("all_in_one", input=input_text, response=response, questions=numbered)
    return prompt.render("all_in_one_no_input", response=response, questions=numbered)
