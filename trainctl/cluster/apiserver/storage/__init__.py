"""Objects and what happens to them, independent of HTTP: the store (memory, SQLite, watch
history), the REST semantics of every verb (``resources``), patching, scale, deletion, garbage
collection, ClusterIPs, and the in-memory Metrics API."""
