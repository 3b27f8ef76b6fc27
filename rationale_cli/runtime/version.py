"""The toolkit's version: ``rationale --version`` and ``versions.json`` in every run directory."""

VERSION = "0.1.0"
