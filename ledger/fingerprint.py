"""The inference-config fingerprint: one hash for everything that shapes a revision's outputs."""

from __future__ import annotations

import hashlib
from typing import Any, NotRequired, TypedDict

from ledger.chain import canonical_json


class FingerprintComponents(TypedDict):
    weights_digest: str
    tokenizer_digest: str
    chat_template_digest: str
    generation_config_digest: str
    image_digest: str
    launch_parameters: dict
    context_limit: int
    gateway_policy_sha256: NotRequired[str]
    cuda_version: NotRequired[str]
    driver_version: NotRequired[str]


def fingerprint_components(
    model_asset: Any, runtime: Any, context_limit: int, gateway_policy: Any = None
) -> FingerprintComponents:
    """`gateway_policy` counts once its document is recorded (its limits shape outputs);
    a version known by name only adds nothing, so fingerprints made before policies
    were versioned stay what they were. The runtime's CUDA and driver versions count
    the same way: only once stated, so runtimes recorded before they were asked for
    keep their fingerprints, and stating one later is a recorded runtime change."""
    components: FingerprintComponents = {
        "weights_digest": model_asset.weights_digest,
        "tokenizer_digest": model_asset.tokenizer_digest,
        "chat_template_digest": model_asset.chat_template_digest,
        "generation_config_digest": model_asset.generation_config_digest,
        # A tag-only image has no digest; its reference stands in, which is
        # exactly as weak as the tag (see validators.UNPINNED_IMAGE_WHY).
        "image_digest": runtime.image_digest or runtime.image,
        "launch_parameters": runtime.launch_parameters,
        "context_limit": context_limit,
    }
    if gateway_policy is not None and gateway_policy.document is not None:
        components["gateway_policy_sha256"] = gateway_policy.sha256
    # CUDA kernels and the driver's can change numerics (and so outputs) under the same image.
    if getattr(runtime, "cuda_version", ""):
        components["cuda_version"] = runtime.cuda_version
    if getattr(runtime, "driver_version", ""):
        components["driver_version"] = runtime.driver_version
    return components


def compute_fingerprint(
    model_asset: Any, runtime: Any, context_limit: int, gateway_policy: Any = None
) -> str:
    parts = fingerprint_components(model_asset, runtime, context_limit, gateway_policy)
    text = canonical_json(parts)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
