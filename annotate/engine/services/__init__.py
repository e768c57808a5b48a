"""Writes of the engine. The names here are the engine's API for protocols (docs/engine.md)."""

from annotate.engine.services.calls import call_cost, endpoint_test, engine_call, engine_embed
from annotate.engine.services.endpoints import (
    endpoint_create,
    endpoint_get,
    endpoint_request_body,
    endpoint_update,
)
from annotate.engine.services.runs import (
    RunEstimate,
    cap_text,
    engine_background_wait,
    engine_run_cap_set,
    engine_run_create,
    engine_run_estimate,
    engine_run_estimate_new,
    engine_run_execute,
    engine_run_get,
    engine_run_has_work_left,
    engine_run_reopen,
    engine_run_start,
    engine_run_stop,
    engine_run_stopped_by_cap,
    engine_runs_reap,
)

__all__ = [
    "RunEstimate",
    "call_cost",
    "cap_text",
    "endpoint_create",
    "endpoint_get",
    "endpoint_request_body",
    "endpoint_test",
    "endpoint_update",
    "engine_background_wait",
    "engine_call",
    "engine_embed",
    "engine_run_cap_set",
    "engine_run_create",
    "engine_run_estimate",
    "engine_run_estimate_new",
    "engine_run_execute",
    "engine_run_get",
    "engine_run_has_work_left",
    "engine_run_reopen",
    "engine_run_start",
    "engine_run_stop",
    "engine_run_stopped_by_cap",
    "engine_runs_reap",
]
