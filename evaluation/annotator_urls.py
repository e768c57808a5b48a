from django.urls import path

from evaluation import annotator_views

app_name = "annotators"

urlpatterns = [
    path("", annotator_views.annotator_list, name="list"),
    path("<int:annotator_id>/kind/", annotator_views.annotator_kind_update, name="kind"),
    path("users/<int:user_id>/kind/", annotator_views.kiwi_user_kind_update, name="user-kind"),
]
