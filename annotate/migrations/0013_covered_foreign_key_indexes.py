"""Drop the single-column indexes of seven foreign keys that a unique constraint leads with.

Each was a second index on the same leading column (e.g. assignment.task_id beside the unique
(task_id, annotator_id)): every claim, submit and import wrote both, and PostgreSQL's planner
opened both whenever it planned a query over the table, on a new connection building each
one's description from the catalogs first. The unique constraints answer the same lookups.

Only the indexes are dropped (the same statement on PostgreSQL and SQLite). Left to itself,
Django would rebuild the SQLite tables to alter the fields, which drops their triggers (the
TaskSlots counter's, migration 0011), and would drop and re-check the foreign keys on
PostgreSQL.
"""

import django.db.models.deletion
from django.db import migrations, models

# (model, field, related model, related name, table, column, index Django named for it)
COVERED = [
    (
        "assignment",
        "task",
        "annotate.task",
        "assignments",
        "annotate_assignment",
        "task_id",
        "annotate_assignment_task_id_edeea3df",
    ),
    (
        "batch",
        "project",
        "annotate.project",
        "batches",
        "annotate_batch",
        "project_id",
        "annotate_batch_project_id_130916d5",
    ),
    (
        "directscore",
        "response",
        "annotate.response",
        "scores",
        "annotate_directscore",
        "response_id",
        "annotate_directscore_response_id_35dc2dc1",
    ),
    (
        "instruction",
        "benchmark",
        "annotate.benchmark",
        "instructions",
        "annotate_instruction",
        "benchmark_id",
        "annotate_instruction_benchmark_id_c5d652b0",
    ),
    (
        "question",
        "instruction",
        "annotate.instruction",
        "questions",
        "annotate_question",
        "instruction_id",
        "annotate_question_instruction_id_7fdb18ae",
    ),
    (
        "response",
        "instruction",
        "annotate.instruction",
        "responses",
        "annotate_response",
        "instruction_id",
        "annotate_response_instruction_id_2441d8c5",
    ),
    (
        "task",
        "batch",
        "annotate.batch",
        "tasks",
        "annotate_task",
        "batch_id",
        "annotate_task_batch_id_07de4059",
    ),
]


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0012_taskslots_update_when"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name=model,
                    name=field,
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name=related_name,
                        to=to,
                    ),
                )
                for model, field, to, related_name, _, _, _ in COVERED
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("{column}")',
                )
                for _, _, _, _, table, column, index in COVERED
            ],
        ),
    ]
