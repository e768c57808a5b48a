from django.urls import path

from annotate.engine import api

urlpatterns = [
    path("endpoints/", api.EndpointCreateApi.as_view(), name="api-engine-endpoints"),
    path("generation-runs/", api.GenerationRunApi.as_view(), name="api-engine-generation-runs"),
    path("runs/<int:engine_run_id>/", api.RunApi.as_view(), name="api-engine-run"),
    path("runs/<int:engine_run_id>/stop/", api.RunStopApi.as_view(), name="api-engine-run-stop"),
    path(
        "runs/<int:engine_run_id>/resume/",
        api.RunResumeApi.as_view(),
        name="api-engine-run-resume",
    ),
]
