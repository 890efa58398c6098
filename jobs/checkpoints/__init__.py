"""Checkpoints that follow a job (issue 36): a job's directory, stored incrementally by content, restored on retry."""
