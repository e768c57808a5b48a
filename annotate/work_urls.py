from django.urls import path

from annotate import work_views

app_name = "work"

urlpatterns = [
    path("", work_views.dashboard, name="dashboard"),
    path("projects/<int:project_id>/next/", work_views.start_next, name="start-next"),
    path("projects/<int:project_id>/done/", work_views.project_done, name="project-done"),
    path("assignments/<int:assignment_id>/", work_views.assignment_page, name="assignment"),
    path(
        "assignments/<int:assignment_id>/return/",
        work_views.assignment_return,
        name="assignment-return",
    ),
    path("projects/", work_views.project_list, name="project-list"),
    path("projects/new/", work_views.project_create, name="project-create"),
    path("projects/<int:project_id>/", work_views.project_detail, name="project-detail"),
    path("projects/<int:project_id>/batches/", work_views.batch_create, name="batch-create"),
    path("projects/<int:project_id>/labels.csv", work_views.labels_csv, name="labels-csv"),
]
