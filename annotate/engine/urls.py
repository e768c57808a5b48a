from django.urls import path

from annotate.engine import views

app_name = "engine"

urlpatterns = [
    path("endpoints/", views.endpoint_list, name="endpoint-list"),
    path("endpoints/new/", views.endpoint_edit, name="endpoint-new"),
    path("endpoints/<int:endpoint_id>/", views.endpoint_edit, name="endpoint-edit"),
    path("endpoints/<int:endpoint_id>/test/", views.endpoint_test_view, name="endpoint-test"),
    path("runs/", views.run_list, name="run-list"),
    path("runs/<int:engine_run_id>/", views.run_detail, name="run-detail"),
    path("runs/<int:engine_run_id>/progress/", views.run_progress, name="run-progress"),
    path("runs/<int:engine_run_id>/stop/", views.run_stop, name="run-stop"),
    path("runs/<int:engine_run_id>/resume/", views.run_resume, name="run-resume"),
    path("generate/", views.generation_new, name="generation-new"),
]
