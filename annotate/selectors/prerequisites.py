"""What a page needs before it can be used, shown as `<section class="prerequisite">`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prerequisite:
    """Something a page needs that is not there yet, what to do, and where (a URL, or "")."""

    problem: str
    action: str
    url: str = ""
