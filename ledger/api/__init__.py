"""The ledger's REST API, one module per feature; `config/api_router.py` mounts them."""
