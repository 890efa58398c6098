import csv
import json

from django.core.management.base import BaseCommand, CommandError

from lending import ledger, selectors


class Command(BaseCommand):
    help = (
        "Totals of the lenders' ledger per lender, node or project, per month or day (JSON, or CSV with --csv); "
        "--backfill first records ended attempts that have no entry (safe to run again: it adds nothing twice)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--group-by", choices=list(selectors.GROUPS), default="lender")
        parser.add_argument("--period", choices=list(selectors.PERIODS), default="month")
        parser.add_argument("--month", default=None, help="YYYY-MM (UTC)")
        parser.add_argument("--csv", action="store_true", help="CSV instead of JSON lines")
        parser.add_argument("--backfill", action="store_true", help="record ended attempts without an entry first")

    def handle(self, *args, group_by, period, month, csv: bool = False, backfill: bool = False, **options):
        if month:
            try:
                selectors.month_range(month)
            except ValueError:
                raise CommandError("--month is YYYY-MM") from None
        if backfill:
            self.stderr.write(f"recorded {ledger.backfill()} ended attempts without an entry")
        from lending.models import LedgerEntry

        rows = selectors.totals(LedgerEntry.objects.all(), group_by=group_by, period=period, month=month)
        if csv:
            _write_csv(self.stdout, rows)
        else:
            for row in rows:
                self.stdout.write(json.dumps(row, sort_keys=True))


def _write_csv(out, rows) -> None:
    if not rows:
        return
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
