"""The cost room: a service's GPU-hours priced by its price sheets and split over its
tenants and task types by the run evidence's breakdown rows, the idle capacity apart
(`attribution`), read per service, per fleet and as a FinOps FOCUS export."""
