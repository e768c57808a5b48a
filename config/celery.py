"""Celery application. Without CELERY_BROKER_URL tasks run in-process (see settings)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("infobench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
