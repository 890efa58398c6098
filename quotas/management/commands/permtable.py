from django.core.management.base import BaseCommand, CommandError

from quotas import permtable


class Command(BaseCommand):
    help = "Write the route × role permission table into docs/api.md (--check: fail when it is stale)."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="exit 1 when docs/api.md differs")

    def handle(self, *args, check=False, **options):
        path = permtable.docs_path()
        text = path.read_text()
        fresh = permtable.spliced(text)
        if check:
            if fresh != text:
                raise CommandError("docs/api.md's permission table is stale: run `python manage.py permtable`")
            return
        if fresh != text:
            path.write_text(fresh)
        self.stderr.write(f"permission table: {len(permtable.rows())} rows in {path}")
