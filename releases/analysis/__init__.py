"""The analysis room: gray stages judged from the engines' own metrics through
Prometheus, on an interval, with automatic hold, rollback and promotion
(`services.run_tick`; the beat task `run_analysis`)."""
