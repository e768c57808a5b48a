"""A progress bar for engine runs in management commands (tqdm, created once totals are known)."""

from __future__ import annotations

from tqdm import tqdm

from annotate.engine.models import EngineRun


class RunProgressBar:
    """Pass as engine_run_execute's on_progress; close() when the run ends."""

    def __init__(self, run: EngineRun, *, unit: str = "unit", disable: bool = False) -> None:
        self.run_id, self.unit, self.disable = run.pk, unit, disable
        self.bar: tqdm | None = None

    def __call__(self, ended: int) -> None:
        if self.bar is None:
            run = EngineRun.objects.get(pk=self.run_id)
            self.bar = tqdm(
                total=run.units_total,
                initial=run.units_done + run.units_failed,
                unit=self.unit,
                disable=self.disable,
            )
        self.bar.update(ended)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
