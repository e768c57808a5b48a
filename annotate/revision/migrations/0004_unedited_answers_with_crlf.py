"""Turns rated with the model's answer sent back unchanged were stored as edited when the browser
sent the text with CRLF line breaks (fixed in turn_rate): clear those edits, and store the CRLF
of real edits, comments and instructions as LF, as turn_rate now does. Imported sessions (no
annotator in the app) keep their text exactly as imported."""

from django.db import migrations


def _plain(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def forwards(apps, schema_editor):
    Turn = apps.get_model("revision", "Turn")
    turns = (
        Turn.objects.filter(edited_answer__contains="\r")
        | Turn.objects.filter(comment__contains="\r")
        | Turn.objects.filter(instruction__contains="\r")
    )
    for turn in turns.filter(session__annotator__isnull=False).iterator():
        edited = _plain(turn.edited_answer)
        if edited == _plain(turn.answer):
            edited = ""
        turn.edited_answer = edited
        turn.comment = _plain(turn.comment)
        turn.instruction = _plain(turn.instruction)
        turn.save(update_fields=["edited_answer", "comment", "instruction"])


class Migration(migrations.Migration):
    dependencies = [("revision", "0003_passage_embeddings")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
