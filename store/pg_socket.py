"""Reaching a PostgreSQL on this machine through its Unix socket rather than loopback TCP.

A round trip over loopback TCP goes through the kernel's TCP stack twice; a Unix socket
skips most of that, and a step makes several round trips. So when the configured URL names a
loopback host (127.0.0.1, localhost, ::1) and that port's socket is in one of the usual
folders, connections go through the socket. The first connection checks that the socket
and the URL's TCP address lead to the same server (the same postmaster start time): a
PostgreSQL published on loopback from a container may sit beside another one that only
listens on its socket. When the socket refuses (`pg_hba.conf` may treat local connections
differently) or leads elsewhere, every connection of the engine uses TCP, as the URL says;
the choice is logged once. A URL that names its own `host=` (a socket folder, or a TCP
address to keep TCP), `ssl` or `sslmode` is taken as it is.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["SOCKET_DIRS", "prefer_socket", "socket_dir"]

log = logging.getLogger(__name__)

#: Where PostgreSQL keeps its socket: Debian's and Ubuntu's folder, then PostgreSQL's default.
SOCKET_DIRS = ("/var/run/postgresql", "/tmp")
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_OWN_WAY = frozenset({"host", "ssl", "sslmode"})


def socket_dir(url: URL, dirs: Sequence[str] = SOCKET_DIRS) -> str | None:
    """The folder holding the Unix socket of the server `url` reaches over loopback TCP;
    None for another host, a URL that says how to connect (`host=`, `ssl`), or no socket."""
    if url.host not in _LOOPBACK or _OWN_WAY & set(url.query):
        return None
    name = f".s.PGSQL.{url.port or 5432}"
    for folder in dirs:
        try:
            if stat.S_ISSOCK((Path(folder) / name).stat().st_mode):
                return folder
        except OSError:
            continue
    return None


def _started(dbapi_conn: Any) -> Any:
    """The server's postmaster start time: the same for every connection to one server."""
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute("SELECT pg_postmaster_start_time()")
        return cursor.fetchone()[0]
    finally:
        cursor.close()


class _SocketFirst:
    """SQLAlchemy's `do_connect` hook: each new connection through the socket, once the
    first showed it works and leads to the URL's server; otherwise over TCP."""

    def __init__(self, folder: str, where: str) -> None:
        self.folder = folder
        self.where = where
        self.socket: bool | None = None  # decided by the first connection that got through

    def __call__(self, dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        from asyncpg.exceptions import InvalidAuthorizationSpecificationError

        if self.socket is False:
            return None  # SQLAlchemy connects as the URL says
        try:
            conn = dialect.connect(*cargs, **{**cparams, "host": self.folder})
        except (OSError, InvalidAuthorizationSpecificationError) as exc:
            if self.socket:
                raise  # it worked before: the server is in trouble, not the socket
            why = f"its Unix socket in {self.folder} refused ({type(exc).__name__})"
            return self._tcp(dialect.connect(*cargs, **cparams), why)
        if self.socket is None:
            try:
                tcp = dialect.connect(*cargs, **cparams)
                same = _started(tcp) == _started(conn)
            except BaseException:
                conn.close()
                raise
            if not same:
                conn.close()
                return self._tcp(tcp, f"its Unix socket in {self.folder} is another server's")
            tcp.close()
            if self.socket is None:
                self.socket = True
                log.info(
                    "PostgreSQL at %s: connecting through its Unix socket in %s",
                    self.where,
                    self.folder,
                )
        return conn

    def _tcp(self, conn: Any, why: str) -> Any:
        if self.socket is None:
            self.socket = False
            log.info("PostgreSQL at %s: connecting over TCP, as %s", self.where, why)
        return conn


def prefer_socket(engine: AsyncEngine, dirs: Sequence[str] = SOCKET_DIRS) -> bool:
    """Make `engine` connect through the local server's Unix socket when there is one (see
    the module docstring); whether it will try."""
    url = engine.url
    folder = socket_dir(url, dirs)
    if folder is None:
        return False
    where = f"{url.host}:{url.port or 5432}"
    event.listen(engine.sync_engine, "do_connect", _SocketFirst(folder, where))
    return True
