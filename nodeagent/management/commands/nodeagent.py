import sys

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Run the node agent (configured by EULER_CONTROL_PLANE_URL, EULER_ENROLLMENT_TOKEN, EULER_NODE_*); "
        "`nodeagent reclaim [--grace S]` / `nodeagent resume` take this machine back from the pool or give it again."
    )

    def add_arguments(self, parser):
        parser.add_argument("args", nargs="*", help="reclaim [--grace S] | resume")

    def run_from_argv(self, argv):
        # `reclaim --grace 30` is the agent's own command line, not Django's: handed over as it is.
        if argv[2:3] in (["reclaim"], ["resume"]):
            from nodeagent.process import main

            sys.exit(main(argv=argv[2:]))
        super().run_from_argv(argv)

    def handle(self, *args, **opts):
        from nodeagent.process import main

        sys.exit(main())
