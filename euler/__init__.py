"""Euler: a lightweight compute control plane."""

from euler.celery import app as celery_app

__all__ = ["celery_app"]
