"""URL map: API under /api/v1/, node-agent protocol under /node-api/, console at /."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from euler import health
from nodes.node_api.root_urls import node_api_v1

handler404 = "euler.errors.handler404"
handler500 = "euler.errors.handler500"

api_v1 = [
    path("", include("quotas.api.urls")),
    path("", include("nodes.api.urls")),
    path("", include("jobs.api.urls")),
    path("", include("jobs.api.logs_urls")),
    path("", include("jobs.outputs.urls")),
    path("", include("jobs.checkpoints.urls")),
    path("", include("agents.api.urls")),
    path("", include("gateway.api.urls")),
    path("", include("audit.api.urls")),
    path("", include("workflows.api.urls")),
    path("", include("lending.api.urls")),
]


urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include(api_v1)),
    path("node-api/v1/", include(node_api_v1)),
    path("admin/", admin.site.urls),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("", include("console.urls")),
]
