"""Governance: a release from its form to its close.

The release form and its fields, the gates and their snapshot, sign-offs, waivers,
comments, the change calendar, the gray rollout, rollbacks and their readiness,
playbooks, and the incident screen. It imports the app's base (models, permissions,
policy, transitions) and no other room."""
