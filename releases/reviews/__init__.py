"""Periodic reviews: a service's scheduled look back, what raises one (triggers),
the facts it gathers, its checklist and actions. It reads governance (plans,
readiness, rolled-back targets), never the other way round."""
