"""Replay over REST: backends, sample sets, runs and probes, under /api/replay/.

Anyone signed in reads everything (auditors included), as in `ledger.api.registry`. Writes
call the `replay.services` verbs with the caller as actor; the domain validates,
decides who may, writes and appends the Event. Each module checks the same rule
first (403 before a payload is even validated) and translates the domain's
refusals into HTTP through `lib.api.DomainVerbMixin`.
"""
