"""Assignment.reject_reason's help text says where the worker reads the reason: beside the work
under 'Your recent assignments' on 'My tasks', and that MTurk sends it only when told of the
reject. A change of the model's state only: on SQLite an AlterField Django decided to apply would
rebuild the table and drop the TaskSlots triggers on it (migration 0011; 0021 says how it was
tried), so the database is left alone outright rather than trusted to see a help text as no
change.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0021_assignment_reject_reason"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="assignment",
                    name="reject_reason",
                    field=models.TextField(
                        blank=True,
                        help_text="Why an admin rejected it, as typed. Sent to the worker as the "
                        "platform's feedback when the platform is told of the reject (MTurk); a "
                        "worker with an account here reads it beside the work under 'Your recent "
                        "assignments' on 'My tasks' (their 20 latest claims); a self-hosted "
                        "participant is not shown it.",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
