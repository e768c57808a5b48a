from django.urls import path

from annotate import import_views, views

app_name = "annotate"

urlpatterns = [
    path("", views.benchmark_list, name="benchmark-list"),
    path("imports/", import_views.import_list, name="import-list"),
    path("imports/<int:job_id>/", import_views.import_detail, name="import-detail"),
    path("<int:benchmark_id>/", views.benchmark_detail, name="benchmark-detail"),
    path("<int:benchmark_id>/labels/", views.label_list, name="label-list"),
    path(
        "<int:benchmark_id>/instructions/<int:instruction_id>/",
        views.instruction_detail,
        name="instruction-detail",
    ),
]
