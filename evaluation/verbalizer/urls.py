from django.urls import path

from evaluation.verbalizer import views

app_name = "verbalizer-reports"

urlpatterns = [
    path("<int:set_id>/", views.report_page, name="detail"),
    path("<int:set_id>/report.<str:fmt>", views.report_download, name="download"),
    path(
        "<int:set_id>/agreement.<str:fmt>",
        views.report_download,
        {"table": "agreement"},
        name="agreement-download",
    ),
    path(
        "<int:set_id>/slices.<str:fmt>",
        views.report_download,
        {"table": "slices"},
        name="slices-download",
    ),
    path("<int:set_id>/human-answers.csv", views.human_answers_download, name="human-answers"),
    path(
        "<int:set_id>/figures/<str:figure_name>.<str:image_format>",
        views.figure_download,
        name="figure",
    ),
    path("<int:set_id>/replies/", views.replies_page, name="replies"),
]
