"""Peak drills: plan, run, conclude (issue 32)."""
