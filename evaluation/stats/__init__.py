"""Statistics on plain sequences and numpy arrays. No Django, DRF or Celery import here."""
