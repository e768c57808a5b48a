"""Request-body overrides per judge protocol, merged into the endpoint's body by the engine
(annotate.engine.services.endpoint_request_body: a value of None removes a key).

A protocol that must send exactly what a reference script sends registers here: the official
InFoBench evaluation.py sends only model, messages and temperature, so REQUEST_PARAMS["official"]
removes max_tokens (and the stream keys of an endpoint that streams: the script does not), and its temperature goes out as the script writes it (the integer 0 for its
default, evaluation.judges.official.request_temperature). Stored in each run's params when it is
created, so a run keeps the body it started with.
"""

from __future__ import annotations

from evaluation.judges.official import request_temperature
from evaluation.judges.prompting import OFFICIAL

REQUEST_PARAMS: dict[str, dict] = {
    OFFICIAL: {"max_tokens": None, "stream": None, "stream_options": None}
}


def request_params(protocol: str, *, temperature: float | None = None) -> dict:
    """Return the overrides of `protocol`; with the endpoint's `temperature`, the official one
    also writes the temperature as the script does."""
    params = dict(REQUEST_PARAMS.get(protocol, {}))
    if protocol == OFFICIAL and temperature is not None:
        params["temperature"] = request_temperature(protocol, temperature)
    return params
