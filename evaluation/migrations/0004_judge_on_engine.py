"""The judge moves onto the model engine: each judge configuration gets an Endpoint made from
its connection fields (which go), each judge run an EngineRun holding its tokens and cost (one
accounting), each answer a link to the engine call it came from."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

OPENAI_URL = "https://api.openai.com/v1"
RUN_STATUS = {"pending": "pending", "running": "failed", "done": "done", "failed": "failed",
              "cancelled": "cancelled"}  # fmt: skip


def _base_url(config) -> str:
    backend = config.backend or settings.JUDGE_BACKEND
    if backend == "fake":
        return ""
    return config.base_url or settings.OPENAI_BASE_URL or OPENAI_URL


def judge_onto_engine(apps, schema_editor):
    Endpoint = apps.get_model("engine", "Endpoint")
    EngineRun = apps.get_model("engine", "EngineRun")
    JudgeConfig = apps.get_model("evaluation", "JudgeConfig")
    JudgeRun = apps.get_model("evaluation", "JudgeRun")
    for config in JudgeConfig.objects.all():
        name = config.name
        if Endpoint.objects.filter(name=name).exists():
            name = f"{config.name} (judge)"
        base_url = _base_url(config)
        config.endpoint = Endpoint.objects.create(
            name=name,
            base_url=base_url,
            model=config.model,
            api_key_env=config.api_key_env if base_url else "",
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout_seconds=config.timeout_seconds,
            concurrency=config.concurrency,
            requests_per_minute=config.requests_per_minute,
            tokens_per_minute=config.tokens_per_minute,
            max_retries=config.max_retries,
            price_prompt_per_1k=config.price_prompt_per_1k,
            price_completion_per_1k=config.price_completion_per_1k,
        )
        config.save(update_fields=["endpoint"])
    for run in JudgeRun.objects.select_related("config__endpoint"):
        run.engine_run = EngineRun.objects.create(
            kind="judge",
            endpoint=run.config.endpoint,
            status=RUN_STATUS.get(run.status, "failed"),
            params={"judge_run_id": run.pk, "prompt_version": run.prompt_version},
            description=f"Judge {run.config.name} (run #{run.pk}, before the engine)",
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            cost_usd=run.cost_usd,
            created_by_id=run.created_by_id,
            started_at=run.started_at,
            finished_at=run.finished_at,
        )
        run.save(update_fields=["engine_run"])


class Migration(migrations.Migration):
    dependencies = [
        ("engine", "0001_engine_core"),
        ("evaluation", "0003_report_exports"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgecall",
            name="engine_call",
            field=models.ForeignKey(
                blank=True,
                help_text="The stored model call (request, reply, status, cost) this answer came from.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="judge_answers",
                to="engine.enginecall",
            ),
        ),
        migrations.AddField(
            model_name="judgeconfig",
            name="endpoint",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="judge_configs",
                to="engine.endpoint",
            ),
        ),
        migrations.AddField(
            model_name="judgerun",
            name="engine_run",
            field=models.OneToOneField(
                blank=True,
                help_text="The engine run that makes and accounts this run's calls.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="judge_run",
                to="engine.enginerun",
            ),
        ),
        migrations.RunPython(judge_onto_engine, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="judgeconfig",
            name="endpoint",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="judge_configs",
                to="engine.endpoint",
            ),
        ),
        migrations.RemoveConstraint(model_name="judgeconfig", name="judgeconfig_concurrency_1"),
        *[
            migrations.RemoveField(model_name="judgeconfig", name=name)
            for name in (
                "api_key_env",
                "backend",
                "base_url",
                "concurrency",
                "max_retries",
                "max_tokens",
                "model",
                "price_completion_per_1k",
                "price_prompt_per_1k",
                "requests_per_minute",
                "temperature",
                "timeout_seconds",
                "tokens_per_minute",
            )
        ],
        *[
            migrations.RemoveField(model_name="judgerun", name=name)
            for name in ("completion_tokens", "cost_usd", "prompt_tokens")
        ],
    ]
