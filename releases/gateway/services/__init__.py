"""The gateway room's verbs: `checks` (is the running gateway doing what the ledger
renders?) and `config_record` (the rendered config recorded after each change of
routing, and announced)."""
