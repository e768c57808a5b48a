from django.urls import path

from annotate.verbalizer import views

app_name = "verbalizer"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("sets/<int:set_id>/", views.set_detail, name="set-detail"),
    path("work/", views.work_list, name="work-list"),
    path("work/<int:human_study_id>/", views.work_next, name="work-next"),
    path("work/<int:human_study_id>/answer/", views.work_answer, name="work-answer"),
]
