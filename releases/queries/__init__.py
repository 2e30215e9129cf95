"""Reads and judgements of the releases app, and of the pages composing all three apps."""
