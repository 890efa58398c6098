"""One ASGI application for HTTP (Django) and websockets (Channels)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from euler.synchandler import route_sync_views  # noqa: E402

# Requests to sync views run whole on one thread (see euler/synchandler.py); async views on Django's handler.
django_asgi = ASGIStaticFilesHandler(route_sync_views(get_asgi_application()))

from django.conf import settings  # noqa: E402

from euler import gcwatch  # noqa: E402

gcwatch.install()

if settings.EULER_WEB_SWITCH_INTERVAL:
    import sys

    sys.setswitchinterval(settings.EULER_WEB_SWITCH_INTERVAL)

from gateway.asgi import route_invoke  # noqa: E402

django_asgi = route_invoke(django_asgi)  # agent invoke calls skip the middleware chain (see gateway/asgi.py)

from nodes.node_api.asgi import route_node_api  # noqa: E402

django_asgi = route_node_api(django_asgi)  # so do the node-agent endpoints (see nodes/node_api/asgi.py)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402
from jobs.tunnel import NodeTunnelConsumer  # noqa: E402
from nodes.node_api.asgi import route_node_tunnel  # noqa: E402
from quotas.wsauth import websocket_application  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi,
        # the node tunnel authenticates the node credential itself: no session, key or Origin check on its way
        "websocket": route_node_tunnel(
            NodeTunnelConsumer.as_asgi(), websocket_application(URLRouter(websocket_urlpatterns))
        ),
    }
)

gcwatch.tune(settings.EULER_WEB_GC_FULL_AFTER)  # everything is imported: freeze it, and collect fully less often
