from django.core.management.base import CommandError

from audit.commands import AuditedCommand
from euler.errors import EulerError
from nodes.gpuhealth import node_gpu_reset, unhealthy
from nodes.models import Node


class Command(AuditedCommand):
    help = (
        "Reset a node's unhealthy GPU (by UUID), or all of them: the agent clears its mark and looks again; "
        "the GPU returns once the agent no longer sees the fault. Without --gpu or --all: list the unhealthy GPUs."
    )

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--gpu", metavar="UUID", help="the GPU to reset")
        parser.add_argument("--all", action="store_true", help="every unhealthy GPU of the node")

    def handle(self, *args, **opts):
        node = Node.objects.filter(name=opts["name"]).first()
        if node is None:
            raise CommandError(f"no node named {opts['name']!r}")
        if not opts["gpu"] and not opts["all"]:
            for gpu in unhealthy(node):
                self.stdout.write(f"{gpu['uuid']}\tGPU {gpu.get('index', '?')}\t{gpu.get('health_reason', '')}")
            return
        try:
            uuids = node_gpu_reset(node=node, uuid=opts["gpu"] or None)
        except EulerError as exc:
            raise CommandError(exc.message) from None
        for uuid in uuids:
            self.stdout.write(f"{node.name}: reset of {uuid} sent to its agent")
