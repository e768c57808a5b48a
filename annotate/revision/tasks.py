"""Celery tasks of revision sessions: adapters that take ids and call one service."""

from celery import shared_task

from annotate.revision.services.generation import session_generate_initial, turn_generate


@shared_task(name="revision.generate_initial", acks_late=True)
def generate_initial_task(session_id: int) -> None:
    session_generate_initial(session_id=session_id)


@shared_task(name="revision.generate_turn", acks_late=True)
def generate_turn_task(turn_id: int) -> None:
    turn_generate(turn_id=turn_id)
