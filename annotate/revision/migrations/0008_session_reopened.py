"""A given-up session can be reopened by a researcher (who and when kept): it then holds its
(question, system) no more, so the pair is handed out again (it was held until an admin deleted
the session, losing the trace)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("revision", "0007_session_given_up"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="revisionsession",
            name="revision_session_one_per_question_system",
        ),
        migrations.AddField(
            model_name="revisionsession",
            name="reopened_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="revisionsession",
            name="reopened_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="revision_sessions_reopened",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddConstraint(
            model_name="revisionsession",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("reopened_at__isnull", True), ("status", "given-up"), _connector="OR"
                ),
                name="revision_session_reopened_given_up",
            ),
        ),
        migrations.AddConstraint(
            model_name="revisionsession",
            constraint=models.UniqueConstraint(
                condition=models.Q(("annotator__isnull", False), ("reopened_at__isnull", True)),
                fields=("question", "system"),
                name="revision_session_one_per_question_system",
            ),
        ),
    ]
