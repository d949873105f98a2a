"""Readers of what a user hands us, each with its limits checked in one place (size, depth, integer
digits, duplicate keys, encoding), the one redaction pass, and the console and path helpers every
command shares. Modules are imported by path (``skillreach._io.yaml``, ``.json`` (JSON and JSONL),
``.toml``, ``.csv``, ``.redact``, ``.urls``, ``.paths``, ``.console``).
"""
