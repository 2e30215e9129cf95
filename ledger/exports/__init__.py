"""What the ledger contributes to an auditor's export: its events as CSV or JSON Lines,
spreadsheet-safe and streamed, and the evidence bundle that proves itself offline (a
contiguous chain segment, the files it references, a manifest and a signed in-toto
Statement). `scripts/verify_bundle.py` checks a bundle without this server.

Record types of the higher apps (releases, sign-offs, reviews) join an export through
`bundle.RecordFile`s they hand to `bundle.write_bundle`.
"""
