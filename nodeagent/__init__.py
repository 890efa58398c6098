"""The Euler node agent: runs on hosts, talks the node protocol, imports no Django models."""

__version__ = "0.1.0"
