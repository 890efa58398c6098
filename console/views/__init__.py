"""Console pages, one module per area; each calls the same services as the REST API."""
