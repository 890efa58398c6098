from django.contrib.auth.views import LogoutView
from django.urls import path

from console import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("project/switch/", views.switch_project, name="switch-project"),
]
