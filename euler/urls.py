"""URL map: API under /api/v1/, node-agent protocol under /node-api/, console at /."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from euler import health

handler404 = "euler.errors.handler404"
handler500 = "euler.errors.handler500"

api_v1 = [
    path("", include("quotas.api.urls")),
]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include(api_v1)),
    path("admin/", admin.site.urls),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("", include("console.urls")),
]
