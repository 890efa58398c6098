import sys

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the node agent (configured by EULER_CONTROL_PLANE_URL, EULER_ENROLLMENT_TOKEN, EULER_NODE_*)."

    def handle(self, *args, **opts):
        from nodeagent.daemon import main

        sys.exit(main())
