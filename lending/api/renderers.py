"""CSV for the ledger: `?format=csv` or `Accept: text/csv`."""

from __future__ import annotations

import csv
import io

from rest_framework.renderers import BaseRenderer


class CsvRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        rows = data.get("rows") if isinstance(data, dict) and "rows" in data else data
        if isinstance(rows, dict):  # an error answer: its fields as one row
            rows = [rows]
        out = io.StringIO()
        if rows:
            fields = list(rows[0])
            writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return out.getvalue().encode()
