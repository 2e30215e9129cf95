"""The model a per-request file measured, read from the request bodies it recorded.

Per-request files have no summary that names the model, but every request body
the tool sent does (`"model": "gemma-3-270m"` in an OpenAI-style request):
perf_analyzer keeps it as `request_inputs.payload`, inference-perf as
`request`, AIPerf's raw export as `payload`; the generic format has a `model`
column. The most frequent name becomes
`meta["model"]`, which `ledger.queries.match_evidence` compares with the
revision like a summary file's model; a file whose bodies name none leaves
`meta` without one, and its evidence is *unverified*.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

# Bodies longer than this are not parsed for their model: a long-context prompt
# would cost a parse of megabytes for one short key near the start.
_MAX_BODY = 1024 * 1024


def body_model(body: Any) -> str | None:
    """The `model` of a request body given as an object or as its JSON text."""
    if isinstance(body, str | bytes):
        if len(body) > _MAX_BODY:
            return None
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
    if isinstance(body, dict):
        model = body.get("model")
        if isinstance(model, str) and model.strip():
            return model.strip()
    return None


class RequestModels:
    """Counts the model each request body names, as a file streams past."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, body: Any) -> None:
        """Count the model a request body names."""
        self.add_name(body_model(body))

    def add_name(self, model: Any) -> None:
        """Count a model name given as it is (a column of the generic format)."""
        if isinstance(model, str) and model.strip():
            self.counts[model.strip()] += 1

    def meta(self) -> dict[str, str | int | float | bool | None]:
        """`{"model": the most frequent name, "model_requests": how many named it}`, or {}."""
        if not self.counts:
            return {}
        model, count = self.counts.most_common(1)[0]
        return {"model": model, "model_requests": count}

    def warnings(self) -> list[str]:
        if len(self.counts) < 2:
            return []
        named = ", ".join(f"{name} ({n})" for name, n in self.counts.most_common())
        return [
            f"the requests name {len(self.counts)} models: {named}; the most frequent is "
            "compared with the revision"
        ]
