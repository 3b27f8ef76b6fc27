"""Distributions over rationale masks."""
