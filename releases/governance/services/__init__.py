"""The releases app's verbs: every change to a release goes through here.

Each verb locks what it changes, checks who may (`releases.permissions`),
writes, and appends its Event in one transaction; emails go out on commit.
Refusals: ValidationError (bad input, 400), PermissionDenied (403),
TransitionRefused (the state does not allow it, 409), GatesNotPassed (422).
"""

from releases.governance.services.calendar import (
    create_blackout_window,
    create_standard_template,
    retire_standard_template,
)
from releases.governance.services.comments import add_comment
from releases.governance.services.drift import reconcile_change, record_unauthorized_changes
from releases.governance.services.errors import GatesNotPassed, TransitionRefused
from releases.governance.services.lifecycle import (
    EDITABLE_FIELDS,
    create_release,
    early_start,
    reopen_release,
    start_rollout,
    submit_release,
    update_release,
    withdraw_release,
)
from releases.governance.services.playbooks import (
    clear_degradation,
    clear_playbook,
    set_degradation,
    set_playbook,
)
from releases.governance.services.readiness import (
    verify_release_rollback_target,
    verify_rollback_target,
)
from releases.governance.services.rollbacks import (
    answer_rollback_caches,
    confirm_rollback,
    record_rollback,
    reverify_rollback,
)
from releases.governance.services.rollout import (
    abort_release,
    close_release,
    end_observation_window,
    hold_release,
    promote_release,
    record_observation,
)
from releases.governance.services.signoffs import (
    grant_waiver,
    revalidate_release,
    revoke_waiver,
    sign_off,
    sync_signoffs,
)

__all__ = [
    "EDITABLE_FIELDS",
    "GatesNotPassed",
    "TransitionRefused",
    "abort_release",
    "add_comment",
    "answer_rollback_caches",
    "clear_degradation",
    "clear_playbook",
    "close_release",
    "confirm_rollback",
    "create_blackout_window",
    "create_release",
    "create_standard_template",
    "early_start",
    "end_observation_window",
    "grant_waiver",
    "hold_release",
    "promote_release",
    "reconcile_change",
    "record_observation",
    "record_rollback",
    "record_unauthorized_changes",
    "reopen_release",
    "retire_standard_template",
    "revalidate_release",
    "reverify_rollback",
    "revoke_waiver",
    "set_degradation",
    "set_playbook",
    "sign_off",
    "start_rollout",
    "submit_release",
    "sync_signoffs",
    "update_release",
    "verify_release_rollback_target",
    "verify_rollback_target",
    "withdraw_release",
]
