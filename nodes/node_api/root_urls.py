"""The URL map of the node-agent handler (asgi.py): the node endpoints alone, as euler/urls.py mounts them, so
that a node request is not matched against the admin, the API and the console first."""

from django.urls import include, path

from euler.urls import node_api_v1

urlpatterns = [path("node-api/v1/", include(node_api_v1))]
