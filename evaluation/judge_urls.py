from django.urls import path

from evaluation import judge_views

app_name = "judge"

urlpatterns = [
    path("", judge_views.run_list, name="run-list"),
    path("new/", judge_views.run_new, name="run-new"),
    path("<int:run_id>/", judge_views.run_detail, name="run-detail"),
    path("<int:run_id>/resume/", judge_views.run_resume, name="run-resume"),
]
