"""Compile a LaTeX export as a researcher pastes it into a paper: the tables inside a minimal
article with the packages docs/report-exports.md names (T1 fonts, booktabs)."""

import shutil
import subprocess

import pytest

needs_pdflatex = pytest.mark.skipif(
    shutil.which("pdflatex") is None, reason="pdflatex is not installed"
)


def assert_latex_compiles(tmp_path, tables: str) -> None:
    """pdflatex stops at the first error (nonstop, halt on error, no shell escape); the
    assertion shows the end of its log, where the error is."""
    document = tmp_path / "tables.tex"
    document.write_text(
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
        "\\begin{document}\n" + tables + "\n\\end{document}\n"
    )
    result = subprocess.run(
        [
            "pdflatex",
            "-interaction=nonstopmode",
            "-halt-on-error",
            "-no-shell-escape",
            "tables.tex",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert (tmp_path / "tables.pdf").read_bytes().startswith(b"%PDF-")
