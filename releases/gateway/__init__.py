"""The gateway room: what the LLM gateway should be doing, rendered for LiteLLM."""
