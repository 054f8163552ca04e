"""The cache store: a SQLite-indexed local store of zstd tar artifacts, and its remote layers.

Nothing is imported here: callers import the module they need (`vx.store.local`,
`vx.store.unpacking`, …), so that loading one leaf — `vx.store.rows`, which the replay of a
receipt uses — never pulls in sqlite3, zstandard or the records.
"""
