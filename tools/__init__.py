"""Checks on the project that read its code and template (nothing is deployed or run)."""
