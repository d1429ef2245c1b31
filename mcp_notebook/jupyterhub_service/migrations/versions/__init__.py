"""One module per schema version."""
