"""Turns rated with the model's answer sent back unchanged were stored as edited when the browser
sent the text with CRLF line breaks (fixed in turn_rate). Sessions made in the app only; imported
sessions keep their text exactly as imported.

- Such a turn rated neutral, or rated bad as its session's last turn, loses the edit; a next
  turn that revised the CRLF copy gets the model's answer as its previous answer (the same
  text but for the carriage returns), as the history rule now gives it.
- Such a turn rated bad with a later turn keeps its "edit": the session went on from that
  answer (the rule drops an unedited bad answer), so the history stays what the model saw.
- Comments and instructions lose their carriage returns, as turn_rate and turn_start now store
  them.
"""

from django.db import migrations
from django.db.models import Q


def _plain(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def forwards(apps, schema_editor):
    Turn = apps.get_model("revision", "Turn")
    crlf = Q(edited_answer__contains="\r") | Q(comment__contains="\r")
    crlf |= Q(instruction__contains="\r")
    ids = list(
        Turn.objects.filter(crlf, session__annotator__isnull=False).values_list("pk", flat=True)
    )
    for pk in ids:
        turn = Turn.objects.get(pk=pk)
        later = Turn.objects.filter(session_id=turn.session_id, position=turn.position + 1).first()
        fields = {"comment": _plain(turn.comment), "instruction": _plain(turn.instruction)}
        unchanged = turn.edited_answer and _plain(turn.edited_answer) == _plain(turn.answer)
        if unchanged and (turn.rating != "bad" or later is None):
            fields["edited_answer"] = ""
            if later is not None and later.previous_answer == turn.edited_answer:
                Turn.objects.filter(pk=later.pk).update(previous_answer=turn.answer)
        Turn.objects.filter(pk=pk).update(**fields)


class Migration(migrations.Migration):
    dependencies = [("revision", "0003_passage_embeddings")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
