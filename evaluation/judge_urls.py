from django.urls import path

from evaluation import judge_views

app_name = "judge"

urlpatterns = [
    path("judges/", judge_views.config_list, name="config-list"),
    path("runs/", judge_views.run_list, name="run-list"),
    path("runs/new/", judge_views.run_new, name="run-new"),
    path("runs/<int:run_id>/", judge_views.run_detail, name="run-detail"),
    path("runs/<int:run_id>/resume/", judge_views.run_resume, name="run-resume"),
]
