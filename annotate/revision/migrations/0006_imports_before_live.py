"""Bring what was imported before 0005 (StudySystem.live) and the export-form import key in line
with what imports now store.

- A system known only from imported sessions (no endpoint, no session of the app, every
  session of it imported) is not live, as import_sessions now makes such a system: with the
  default of 0005 it stayed live, so annotators got sessions with the offline fake model under
  a published model's name, counted with the imported ones. import_study --system NAME makes
  it live again.
- An imported session's key was the hash of its line as given ("GOOD"); imports now key a line
  as the export writes it back ("good"), so the export of a study imported before was read as
  new sessions and counted twice. The key is recomputed from the stored session, as
  exports.session_record writes it and imports._as_exported reads it. Where two sessions
  imported before come to one key (one line imported as "GOOD" and as "good"), the first keeps
  it and the other its old key.
"""

import hashlib
import json

from django.db import migrations
from django.db.models import Exists, OuterRef

LABELS = ("instruction_type", "instruction_category", "error_category")


def _key(session, turns) -> str:
    record = dict(session.extra)
    record.update(
        original_question=session.question.text,
        model_name=session.system.name,
        initial_answer=session.initial_answer,
        interaction=[],
    )
    for turn in turns:
        row = dict(turn.extra)
        row.update(
            instruction=turn.instruction,
            answer_1=turn.answer,
            answer_2=turn.edited_answer,
            rating=turn.rating,
            comment=turn.comment,
        )
        row.update({name: getattr(turn, name) for name in LABELS if getattr(turn, name)})
        record["interaction"].append(row)
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def forwards(apps, schema_editor):
    StudySystem = apps.get_model("revision", "StudySystem")
    RevisionSession = apps.get_model("revision", "RevisionSession")
    Turn = apps.get_model("revision", "Turn")
    of_system = RevisionSession.objects.filter(system=OuterRef("pk"))
    StudySystem.objects.filter(endpoint_name="").filter(
        Exists(of_system.exclude(source_key="")),
        ~Exists(of_system.filter(source_key="")),
    ).update(live=False)

    imported = (
        RevisionSession.objects.exclude(source_key="")
        .select_related("question", "system")
        .order_by("study_id", "source_position", "id")
    )
    taken = set(imported.values_list("study_id", "source_key"))
    for session in imported.iterator():
        turns = Turn.objects.filter(session_id=session.pk).order_by("position")
        key = _key(session, turns)
        if key == session.source_key or (session.study_id, key) in taken:
            continue
        taken.add((session.study_id, key))
        RevisionSession.objects.filter(pk=session.pk).update(source_key=key)


class Migration(migrations.Migration):
    dependencies = [("revision", "0005_system_live")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
