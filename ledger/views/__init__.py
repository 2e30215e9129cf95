"""Pages of the registry, one module per feature (the service page and home are `releases`')."""
