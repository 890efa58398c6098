"""The node-agent endpoints' URLs: `node_api_v1`, which config/urls.py mounts under /node-api/v1/, and the URL map of
the node-agent handler (asgi.py), the node endpoints alone, so that a node request is not matched against the
admin, the API and the console first."""

from django.urls import include, path

# By dotted name: the jobs app's node endpoints are mounted here without the nodes app importing it.
node_api_v1 = [
    path("", include("nodes.node_api.urls")),
    path("", include("jobs.node_api.urls")),
    path("", include("jobs.outputs.node_urls")),
    path("", include("jobs.checkpoints.node_urls")),
]

urlpatterns = [path("node-api/v1/", include(node_api_v1))]
