from django.urls import path

from lending.api import views

urlpatterns = [
    path("ledger", views.LedgerView.as_view(), name="ledger"),
    path("lending", views.LendingView.as_view(), name="lending"),
    path("lending/<str:name>/terms", views.TermsView.as_view(), name="lending-terms"),
]
