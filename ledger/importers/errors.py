from __future__ import annotations


class ReportFormatError(Exception):
    """A load-test file that cannot be read as a report.

    `location` is where the problem is: "line 12" for JSON Lines and CSV, a JSON
    path such as "benchmarks[0].metrics.time_to_first_token_ms" for JSON, both
    for a field of a JSON Lines record ("line 3: metrics.request_latency.value"),
    or None when the whole file is at fault (empty, too big, unknown format).
    """

    def __init__(self, filename: str, location: str | None, message: str) -> None:
        self.filename = filename
        self.location = location
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.filename}: {self.location}" if self.location else self.filename
        return f"{where}: {self.message}"
