"""The FinOps Foundation's FOCUS validator (PyPI `focus-validator` 1.0.0, in .venv-focus/,
`make install-focus`), run on a CSV as a FinOps team would run it.

It exits 0 whether or not the file passes (its console says "Validation failed!"), so
the verdict is read from its JUnit report (`--output-type unittest`): every check's
test case, and its failures and errors.

Two of its FOCUS 1.0 rules are its own bugs, overridden here with the reason:

- `ResourceID_Required` asks for a column `ResourceID`; the FOCUS 1.0 specification
  names it `ResourceId` (what the export writes, as the issue asks). The test checks
  `ResourceId` itself instead.
- `SkuPriceId_Nullable` is a query over `ChargeType`, the FOCUS 0.5 column that 1.0
  renamed `ChargeCategory`: on a 1.0 file it fails with KeyError('ChargeType'). The
  test checks its meaning (every Usage row names its SKU price) itself.

It reads its currency codes from a path relative to its working folder
(`focus_validator/utils/currency_codes.csv`), so it runs from its site-packages.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import ROOT

FOCUS_VENV = ROOT / ".venv-focus"
OVERRIDDEN = ("ResourceID_Required", "SkuPriceId_Nullable")


@dataclass(frozen=True)
class FocusVerdict:
    checks: int
    failed: list[str]
    console: str

    @property
    def passed(self) -> bool:
        return self.checks > 0 and not self.failed


def validate_focus(csv_path: Path, work: Path) -> FocusVerdict:
    executable = FOCUS_VENV / "bin" / "focus-validator"
    if not executable.exists():
        raise RuntimeError(f"{executable} is missing: run `make install-focus`")
    (site_packages,) = FOCUS_VENV.glob("lib/python3*/site-packages")
    overrides = work / "focus-overrides.yaml"
    overrides.write_text("overrides:\n" + "".join(f"  - {rule}\n" for rule in OVERRIDDEN))
    report = work / "focus-report.xml"
    run = subprocess.run(
        [
            str(executable),
            *("--data-file", str(csv_path.resolve())),
            *("--validate-version", "1.0"),
            *("--override-file", str(overrides)),
            *("--output-type", "unittest", "--output-destination", str(report)),
        ],
        cwd=site_packages,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    root = ET.parse(report).getroot()  # noqa: S314 - the report the validator just wrote here
    failed = []
    checks = 0
    for case in root.iter("testcase"):
        checks += 1
        for problem in (*case.findall("failure"), *case.findall("error")):
            failed.append(f"{case.get('name')}: {problem.get('message') or problem.text}")
    return FocusVerdict(checks, failed, run.stdout + run.stderr)
