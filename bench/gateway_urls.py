"""Euler's URLs plus /bench-noop, an async view that does nothing (the throughput yardstick)."""

from django.http import HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from config.urls import handler404, handler500  # noqa: F401
from config.urls import urlpatterns as euler_urlpatterns


@csrf_exempt
async def noop(request):
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("bench-noop", noop), *euler_urlpatterns]
