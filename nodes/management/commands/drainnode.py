from django.core.management.base import CommandError

from audit.commands import AuditedCommand
from nodes.models import Node
from nodes.services import node_drain, node_undrain


class Command(AuditedCommand):
    help = "Drain a node (no new work; running work finishes), or undo it with --undo."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--undo", action="store_true")

    def handle(self, *args, **opts):
        node = Node.objects.filter(name=opts["name"]).first()
        if node is None:
            raise CommandError(f"no node named {opts['name']!r}")
        node = node_undrain(node=node) if opts["undo"] else node_drain(node=node)
        self.stdout.write(f"{node.name}: {'draining' if node.draining else 'accepting work'}")
