from django.core.management.base import CommandError

from audit.commands import AuditedCommand
from euler.errors import EulerError
from nodes.models import Node, TrustLevel
from nodes.services import node_approve, node_capacity_approve, node_reject


class Command(AuditedCommand):
    help = "Approve (or reject) a node by name."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--trust", choices=TrustLevel.values)
        parser.add_argument("--public", action="store_true", help="admit to the public pool")
        parser.add_argument("--reject", action="store_true")
        parser.add_argument(
            "--capacity", action="store_true", help="approve the pending capacity change of an approved node"
        )

    def handle(self, *args, **opts):
        node = Node.objects.filter(name=opts["name"]).first()
        if node is None:
            raise CommandError(f"no node named {opts['name']!r}")
        try:
            if opts["reject"]:
                node = node_reject(node=node)
            elif opts["capacity"]:
                node = node_capacity_approve(node=node)
            else:
                node = node_approve(node=node, trust=opts["trust"], public_pool=True if opts["public"] else None)
        except EulerError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"{node.name}: {node.approval}, trust {node.trust}, public pool {'yes' if node.public_pool else 'no'}, "
            f"cpu_milli {node.cpu_milli}, pending capacity {node.pending_capacity or 'none'}"
        )
