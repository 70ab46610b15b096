"""Unit tests: one function, class or file at a time, in-process, no peer but a SQLite file
(or the local PostgreSQL, where the part is the store's own)."""
