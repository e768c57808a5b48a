from django.urls import path

from annotate import api

app_name = "annotate-api"

urlpatterns = [
    path("benchmarks/", api.BenchmarkListApi.as_view(), name="benchmark-list"),
    path("imports/", api.ImportApi.as_view(), name="imports"),
    path("imports/<int:job_id>/", api.ImportJobApi.as_view(), name="import"),
    path("projects/", api.ProjectCreateApi.as_view(), name="project-create"),
    path("projects/<int:project_id>/batches/", api.BatchCreateApi.as_view(), name="batch-create"),
    path(
        "projects/<int:project_id>/progress/",
        api.ProjectProgressApi.as_view(),
        name="project-progress",
    ),
    path(
        "projects/<int:project_id>/labels/",
        api.ProjectLabelsApi.as_view(),
        name="project-labels",
    ),
    path("projects/<int:project_id>/claim/", api.ClaimNextApi.as_view(), name="claim"),
    path("assignments/<int:assignment_id>/", api.AssignmentApi.as_view(), name="assignment"),
    path(
        "assignments/<int:assignment_id>/submit/",
        api.AssignmentSubmitApi.as_view(),
        name="submit",
    ),
    path(
        "assignments/<int:assignment_id>/return/",
        api.AssignmentReturnApi.as_view(),
        name="return",
    ),
]
