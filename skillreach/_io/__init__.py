"""Readers of what a user hands us, each with its limits checked in one place (size, depth, duplicate
keys, encoding), and the console and path helpers every command shares. Modules are imported by path
(``skillreach._io.yaml``, ``.json``, ``.paths``, ``.console``).
"""

