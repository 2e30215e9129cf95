"""The release form's fields are stated once (`releases.governance.forms.release_fields`): the form,
its sections, what it saves and what the release page shows all follow that table."""

from __future__ import annotations

from releases.governance.forms.release import ReleaseForm
from releases.governance.forms.release_fields import FIELD_SPECS, LOGGING_PARTS, SECTIONS
from releases.governance.snapshot import FORM_FIELDS

# Release fields the form builds from several inputs, and the one it is filed under.
BUILT = {"service", "gray_stages", "failure_classifications", "logging_policy"}


def test_the_table_holds_every_field_the_snapshot_records_and_the_form_declares():
    stored = {spec.name for spec in FIELD_SPECS if spec.stored}
    assert stored | BUILT == set(FORM_FIELDS)
    parts = {spec.name for spec in FIELD_SPECS if not spec.stored}
    assert parts == set(LOGGING_PARTS)
    assert {spec.name for spec in FIELD_SPECS} <= set(ReleaseForm.base_fields)


def test_the_sections_list_each_field_once_in_the_tables_order():
    names = [name for _key, _title, fields in SECTIONS for name in fields]
    assert names == [spec.name for spec in FIELD_SPECS]
    assert [key for key, _title, _fields in SECTIONS] == [
        "what",
        "impact",
        "evidence",
        "rollback",
        "capacity",
        "retirement",
        "decommission",
        "logging",
        "path",
    ]
