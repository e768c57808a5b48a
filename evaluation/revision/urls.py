from django.urls import path

from evaluation.revision import views

app_name = "revision-reports"

urlpatterns = [
    path("", views.study_list, name="list"),
    path("<int:study_id>/", views.report_page, name="report"),
    path("<int:study_id>/report.<str:fmt>", views.report_download, name="download"),
    path("<int:study_id>/sessions.<str:fmt>", views.sessions_download, name="sessions-download"),
    path("<int:study_id>/runs/<str:task>/", views.judge_new, name="judge-new"),
    path("<int:study_id>/figures/<str:figure>.<str:image_format>", views.figure, name="figure"),
]
