from django.urls import path

from annotate import views

app_name = "annotate"

urlpatterns = [
    path("", views.benchmark_list, name="benchmark-list"),
    path("<int:benchmark_id>/", views.benchmark_detail, name="benchmark-detail"),
    path(
        "<int:benchmark_id>/instructions/<int:instruction_id>/",
        views.instruction_detail,
        name="instruction-detail",
    ),
]
