"""The report's named conventions and their sources in the InFoBench paper (docs/reports.md).

Plain constants, importable by models, services, views, the API and commands alike, so a label
shown anywhere is the one defined here.
"""

from __future__ import annotations

# How a DRFR counts UNKNOWN answers and questions never asked (report --unknown).
UNKNOWN_CONVENTIONS: dict[str, str] = {
    "exclude": "UNKNOWN and missing labels are not counted (appendix A.3)",
    "no": "every question of a labelled response counts, UNKNOWN and never asked as NO "
    "(equation 1)",
    "official": "answered questions only, UNKNOWN as NO (the official evaluation.py's ratio)",
}
UNKNOWN_MODES = tuple(UNKNOWN_CONVENTIONS)
DEFAULT_UNKNOWN = "exclude"

# How ACC (Table 4) treats a source's UNKNOWN on an item whose gold label is YES or NO.
ACC_CONVENTIONS: dict[str, str] = {
    "exclude": "a source's UNKNOWN is not compared (appendix A.3)",
    "wrong": "a source's UNKNOWN counts as a disagreement with the gold label",
}
ACC_MODES = tuple(ACC_CONVENTIONS)
DEFAULT_ACC = "exclude"
