"""rationale-cli: train select-then-predict models and inspect their rationales."""

__version__ = "0.1.0"
