"""Create a model endpoint (a blank --base-url is the offline fake back-end)."""

from __future__ import annotations

from decimal import Decimal

from django.core.management.base import BaseCommand, CommandError

from annotate.engine.errors import EndpointError, EngineError
from annotate.engine.services import endpoint_create

# The options named otherwise than the endpoint's fields they set.
OPTION_OF_FIELD = {
    "name": "name",
    "requests_per_minute": "--rpm",
    "tokens_per_minute": "--tpm",
    "timeout_seconds": "--timeout",
}


def option_of(field: str) -> str:
    """The option that sets an endpoint field: "max_tokens" -> "--max-tokens"."""
    return OPTION_OF_FIELD.get(field, "--" + field.replace("_", "-"))


class Command(BaseCommand):
    help = "Create an endpoint: where and how to call one model, its limits and prices."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--base-url", required=True, help="Blank: the offline fake.")
        parser.add_argument("--model", required=True)
        parser.add_argument("--api-key-env", default="", help="One of ENGINE_API_KEY_ENVS.")
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument(
            "--rpm",
            type=int,
            help="Requests per minute (default 500; the offline fake: 1,000,000, no pacing).",
        )
        parser.add_argument(
            "--tpm",
            type=int,
            help="Tokens per minute (default 200,000; the offline fake: 1,000,000,000).",
        )
        parser.add_argument("--temperature", type=float, default=0.0)
        parser.add_argument("--max-tokens", type=int, default=None, help="Default: not sent.")
        parser.add_argument("--top-p", type=float, default=None)
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument(
            "--stream", action="store_true", help="Ask for streamed replies (pages show them grow)."
        )
        parser.add_argument("--timeout", type=float, default=120.0, help="Seconds per call.")
        parser.add_argument("--max-retries", type=int, default=5)
        parser.add_argument("--price-prompt-per-1k", type=Decimal, default=Decimal("0"))
        parser.add_argument("--price-completion-per-1k", type=Decimal, default=Decimal("0"))

    def handle(self, *args, **o):
        limits = {"requests_per_minute": o["rpm"], "tokens_per_minute": o["tpm"]}
        try:
            endpoint = endpoint_create(
                name=o["name"],
                base_url=o["base_url"],
                model=o["model"],
                api_key_env=o["api_key_env"],
                concurrency=o["concurrency"],
                **{field: value for field, value in limits.items() if value is not None},
                temperature=o["temperature"],
                max_tokens=o["max_tokens"],
                top_p=o["top_p"],
                seed=o["seed"],
                stream=o["stream"],
                timeout_seconds=o["timeout"],
                max_retries=o["max_retries"],
                price_prompt_per_1k=o["price_prompt_per_1k"],
                price_completion_per_1k=o["price_completion_per_1k"],
            )
        except EndpointError as error:  # named by the option typed, not the model's field
            told = f"{option_of(error.field)}: {error.reason}" if error.field else str(error)
            raise CommandError(f"{told}\nNothing was written.") from None
        except EngineError as error:
            raise CommandError(f"{error}\nNothing was written.") from None
        where = endpoint.base_url or "the offline fake back-end"
        self.stdout.write(f"Created endpoint {endpoint.name}: {endpoint.model} at {where}.")
