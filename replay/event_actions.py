"""The labels of the event actions replay records (`ledger.event_actions`)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from ledger.roles import StrOrPromise

ACTION_LABELS: dict[str, StrOrPromise] = {
    "replay.backend_created": _("Backend registered"),
    "replay.backend_updated": _("Backend changed"),
    "replay.drift_cleared": _("Drift cleared"),
    "replay.drift_detected": _("Drift detected"),
    "replay.regression_detected": _("Regression detected"),
    "replay.run_failed": _("Replay run failed"),
    "replay.run_finished": _("Replay run finished"),
    "replay.run_interrupted": _("Replay run interrupted"),
    "replay.run_queued": _("Replay run queued"),
    "replay.sample_set_imported": _("Sample set imported"),
    "replay.schedule_created": _("Schedule created"),
    "replay.schedule_deleted": _("Schedule deleted"),
    "replay.schedule_updated": _("Schedule changed"),
    "retention.replay_outputs_purged": _("Replay outputs redacted"),
}
