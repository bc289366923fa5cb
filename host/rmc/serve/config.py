"""`rmc serve`'s configuration: the tables, their keys, the operators, the database, the port.

A TOML file (docs/serve.md) and the command line's options, which add to it or override it:

```toml
db = "sqlite:///var/rmc.db"       # or postgresql://user@host:5432/rmc
http = "127.0.0.1:8019"

[[table]]
id = "T1"                         # the table's name, as in its frames
url = "socket://127.0.0.1:40124"  # a serial device or a pyserial URL
key_file = "keys/T1.key"          # its HMAC key, hex (optional)

[[operator]]
name = "marie"
role = "chef"                     # display, chef or engineer
token_file = "tokens/marie"       # the token itself, or token_sha256 = "<hex>"
```
Relative paths are read from the configuration file's folder.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from rmc import infile
from rmc.serve.orders import ROLES
from rmc.serve.tables import TableSpec

DEFAULT_DB = "sqlite:///var/rmc.db"
DEFAULT_HTTP = "127.0.0.1:8019"
_TABLE_ID = re.compile(r"[A-Za-z0-9_-]{1,16}")
_LEASE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class ConfigError(ValueError):
    """A configuration the service cannot run with (one-line reason)."""


@dataclass(frozen=True)
class Operator:
    name: str
    role: str
    token_sha256: str  # hex: tokens are never kept in memory or on record in clear


@dataclass
class ServeConfig:
    tables: list[TableSpec] = field(default_factory=list)
    operators: list[Operator] = field(default_factory=list)
    db: str = DEFAULT_DB
    http: str = DEFAULT_HTTP
    mqtt: str | None = None  # a broker's URL: results published there (rmc.serve.mqtt)
    mqtt_prefix: str | None = None  # its topics' prefix (default: the URL's path, else "rmc")
    lease: str | None = None  # this service's name in the tables' leases (rmc.serve.lease)
    tls_cert: str | None = None  # HTTPS: the certificate chain (PEM) ...
    tls_key: str | None = None  # ... and its private key
    plain_http: bool = False  # plain HTTP on another address than loopback, asked for
    standby: set[str] = field(default_factory=set)  # tables taken only when their lease expired

    @property
    def host_port(self) -> tuple[str, int]:
        return parse_http(self.http)

    def operator(self, token: str) -> Operator | None:
        """The operator a token belongs to (compared in constant time), or None."""
        digest = token_digest(token)
        found = None
        for op in self.operators:
            if hmac.compare_digest(op.token_sha256, digest):
                found = op
        return found


def token_digest(token: str) -> str:
    return hashlib.sha256(token.strip().encode()).hexdigest()


def parse_http(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--http must be HOST:PORT, not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def read_key(path: Path) -> bytes:
    from rmc.keys import read_key as read

    try:
        key = read(str(path))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    assert key is not None
    return key


def read_token(path: Path) -> str:
    try:
        token = infile.read_text(path).strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"cannot read token file {path}: {getattr(e, 'strerror', None) or e}"
        ) from None
    if len(token) < 16:
        raise ConfigError(f"token file {path}: a token needs 16 characters or more")
    return token


def table_spec(id_: str, url: str, key: bytes | None = None) -> TableSpec:
    if not _TABLE_ID.fullmatch(id_):
        raise ConfigError(f"table id {id_!r}: 1 to 16 letters, digits, '-' or '_'")
    if not url:
        raise ConfigError(f"table {id_}: no url")
    return TableSpec(id_, url, key)


def load(path: Path | None) -> ServeConfig:
    """The configuration file's content (an empty configuration without a file)."""
    cfg = ServeConfig()
    if path is None:
        return cfg
    try:
        data = tomllib.loads(infile.read_text(path))
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    base = path.parent
    cfg.db = str(data.get("db", cfg.db))
    cfg.http = str(data.get("http", cfg.http))
    cfg.mqtt = str(data["mqtt"]) if data.get("mqtt") else None
    cfg.mqtt_prefix = str(data["mqtt_prefix"]) if data.get("mqtt_prefix") else None
    cfg.lease = str(data["lease"]) if data.get("lease") else None
    for name in ("tls_cert", "tls_key"):
        if data.get(name):
            setattr(cfg, name, str(base / str(data[name])))
    cfg.plain_http = data.get("plain_http") is True
    for t in _list(data, "table", path):
        key = read_key(base / t["key_file"]) if t.get("key_file") else None
        cfg.tables.append(table_spec(str(t.get("id", "")), str(t.get("url", "")), key))
        if t.get("standby"):
            cfg.standby.add(cfg.tables[-1].id)
    for o in _list(data, "operator", path):
        name, role = str(o.get("name", "")), str(o.get("role", ""))
        if not name or role not in ROLES:
            raise ConfigError(
                f"{path}: operator {name!r} needs a name and a role ({', '.join(ROLES)})"
            )
        if o.get("token_sha256"):
            digest = str(o["token_sha256"]).lower()
            if not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise ConfigError(f"{path}: operator {name}: token_sha256 is not a SHA-256 in hex")
        elif o.get("token_file"):
            digest = token_digest(read_token(base / o["token_file"]))
        else:
            raise ConfigError(f"{path}: operator {name} has no token_file nor token_sha256")
        cfg.operators.append(Operator(name, role, digest))
    check(cfg)
    return cfg


def check(cfg: ServeConfig) -> None:
    ids = [t.id for t in cfg.tables]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"table {dup[0]} is listed twice")
    names = [o.name for o in cfg.operators]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"operator {dup[0]} is listed twice")
    digests = [o.token_sha256 for o in cfg.operators]
    if len(set(digests)) != len(digests):
        raise ConfigError("two operators share a token")
    host, _ = parse_http(cfg.http)
    check_tls(cfg, host)
    if cfg.lease is not None and not _LEASE.fullmatch(cfg.lease):
        raise ConfigError(f"lease name {cfg.lease!r}: 1 to 64 letters, digits, '.', '-' or '_'")
    if cfg.standby and cfg.lease is None:
        raise ConfigError('standby tables need a lease name (lease = "NAME" or --lease)')
    if cfg.mqtt is not None:
        from rmc.serve import mqtt

        try:
            prefix = mqtt.parse_url(cfg.mqtt).prefix
            mqtt.check_prefix(cfg.mqtt_prefix or prefix or mqtt.DEFAULT_PREFIX)
        except mqtt.MqttError as e:
            raise ConfigError(str(e)) from None


def _list(data: dict, name: str, path: Path) -> list[dict]:
    items = data.get(name, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ConfigError(f"{path}: [[{name}]] must be a list of tables")
    return items


def check_tls(cfg: ServeConfig, host: str) -> None:
    """HTTPS when both files are given and load; on an address other than loopback the
    operators' tokens would cross the network: TLS is then required, unless plain HTTP is
    asked for (a TLS proxy in front, a closed network)."""
    if (cfg.tls_cert is None) != (cfg.tls_key is None):
        raise ConfigError("TLS needs both a certificate and its key (tls_cert and tls_key)")
    if cfg.tls_cert is not None:
        import ssl

        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                cfg.tls_cert, cfg.tls_key
            )
        except (OSError, ssl.SSLError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ConfigError(f"TLS: cannot use {cfg.tls_cert} with {cfg.tls_key}: {why}") from None
    elif not is_loopback(host) and not cfg.plain_http:
        raise ConfigError(
            f"listening on {host} needs TLS: give tls_cert and tls_key (--tls-cert, "
            "--tls-key), or --plain-http to send the operators' tokens in clear"
        )


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may be reached from elsewhere
