"""A minimal protocol for the engine's own tests: one call per item of run.params["items"];
the item "boom" makes the protocol's code raise (a bug), "fail" fails its unit."""

from __future__ import annotations

from annotate.engine.protocols import UnitEstimate, UnitFailed

STORED: list[tuple[int, str, str]] = []  # (run id, unit key, reply) in store order
FINISHED: list[tuple[int, str]] = []  # (run id, status) each time on_finish is called


class EchoProtocol:
    def units(self, run):
        return [f"echo:{item}" for item in run.params["items"]]

    def load(self, run, keys):
        return {key: [{"role": "user", "content": f"Say {key[5:]}"}] for key in keys}

    def estimate(self, run, key, work):
        return UnitEstimate(calls=1, prompt_tokens=10)

    def execute(self, run, key, ctx):
        if key == "echo:boom":
            raise RuntimeError("the protocol's own bug")
        if key == "echo:fail":
            raise UnitFailed("this unit cannot be done")
        return ctx.chat(ctx.work, purpose="echo").reply

    def store(self, run, results):
        STORED.extend((run.pk, result.key, result.value) for result in results)

    def on_finish(self, run):
        FINISHED.append((run.pk, run.status))
