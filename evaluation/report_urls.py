from django.urls import path

from evaluation import report_views

app_name = "reports"

urlpatterns = [
    path("", report_views.report_list, name="list"),
    path("<int:benchmark_id>/", report_views.report_page, name="detail"),
    path("<int:benchmark_id>/report.<str:fmt>", report_views.report_download, name="download"),
    path(
        "<int:benchmark_id>/tables/<str:table>.<str:fmt>",
        report_views.table_download,
        name="table",
    ),
    path(
        "<int:benchmark_id>/figures/<str:name>.<str:image_format>",
        report_views.figure_download,
        name="figure",
    ),
    path(
        "<int:benchmark_id>/labels-aggregated.csv",
        report_views.aggregated_labels_download,
        name="aggregated-labels",
    ),
    path("<int:benchmark_id>/export/", report_views.report_export_start, name="export"),
    path(
        "<int:benchmark_id>/exports/<int:export_id>/",
        report_views.report_export_status,
        name="export-status",
    ),
    path(
        "<int:benchmark_id>/exports/<int:export_id>/download/",
        report_views.report_export_download,
        name="export-download",
    ),
]
