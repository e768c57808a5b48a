"""Create an LLM judge configuration (and its `llm` annotator), on an existing engine endpoint
(--endpoint) or on a new one of the same name made from the connection options."""

from __future__ import annotations

from decimal import Decimal

from django.core.management.base import BaseCommand, CommandError

from annotate.engine.errors import EngineNotFoundError
from annotate.engine.models import Endpoint
from annotate.engine.services import endpoint_get
from annotate.errors import AnnotateError
from annotate.selectors.names import names_there_are
from evaluation.errors import EvaluationError
from evaluation.models import JudgeProtocol
from evaluation.services.judge_configs import judge_config_create


class Command(BaseCommand):
    help = "Create a judge configuration; its labels land under an llm annotator of that name."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--endpoint", help="Use this engine endpoint (no connection options).")
        parser.add_argument("--backend", default="", help="openai, fake, or blank for settings.")
        parser.add_argument("--base-url", default="")
        parser.add_argument("--model", default="gpt-4-0314")
        parser.add_argument("--api-key-env", default="OPENAI_API_KEY")
        parser.add_argument("--protocol", choices=JudgeProtocol.values, default="multi_turn")
        parser.add_argument("--temperature", type=float, default=0.0)
        parser.add_argument("--max-retries", type=int, default=5)
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--rpm", type=int, help="Default 200; the offline fake: not paced.")
        parser.add_argument("--tpm", type=int, help="Default 40,000; the offline fake: not paced.")
        parser.add_argument("--price-prompt-per-1k", type=Decimal, default=Decimal("0.03"))
        parser.add_argument("--price-completion-per-1k", type=Decimal, default=Decimal("0.06"))

    def handle(self, *args, **o):
        if o["endpoint"]:
            try:
                endpoint = endpoint_get(name=o["endpoint"])
            except EngineNotFoundError:
                known = names_there_are(Endpoint.objects.all(), what="endpoints")
                raise CommandError(f"No endpoint named {o['endpoint']!r} ({known}).") from None
            try:
                config = judge_config_create(
                    name=o["name"], endpoint=endpoint, protocol=o["protocol"]
                )
            except (EvaluationError, AnnotateError) as error:
                raise CommandError(str(error)) from None
            self.stdout.write(f"Created judge configuration {config.name} on {endpoint.name}.")
            return
        try:
            config = judge_config_create(
                name=o["name"],
                backend=o["backend"],
                base_url=o["base_url"],
                model=o["model"],
                api_key_env=o["api_key_env"],
                protocol=o["protocol"],
                temperature=o["temperature"],
                max_retries=o["max_retries"],
                concurrency=o["concurrency"],
                **{
                    field: o[option]
                    for field, option in (
                        ("requests_per_minute", "rpm"),
                        ("tokens_per_minute", "tpm"),
                    )
                    if o[option] is not None
                },
                price_prompt_per_1k=o["price_prompt_per_1k"],
                price_completion_per_1k=o["price_completion_per_1k"],
            )
        except EvaluationError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"Created judge configuration {config.name} (annotator {config.annotator}, "
            f"endpoint {config.endpoint.name})."
        )
