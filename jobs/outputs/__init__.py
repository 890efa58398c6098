"""Job outputs and inputs (issue 24): declared paths, stored files, the node upload routes, the user downloads."""
