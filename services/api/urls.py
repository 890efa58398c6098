from django.urls import path

from services.api import views

urlpatterns = [
    path("services", views.ServiceListView.as_view(), name="services"),
    path("services/<str:name>", views.ServiceDetailView.as_view(), name="service-detail"),
    path("services/<str:name>/scale", views.ServiceScaleView.as_view(), name="service-scale"),
    path("services/<str:name>/logs", views.ServiceLogsView.as_view(), name="service-logs"),
]
