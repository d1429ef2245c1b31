"""Resource providers: one module per kind of resource."""
