from django.urls import path

from lending.api import views

urlpatterns = [
    path("ledger", views.LedgerView.as_view(), name="ledger"),
]
