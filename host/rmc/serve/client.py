"""A small client of the service's HTTP API, for `rmc table` and the tests (standard library
only: an operator's machine needs nothing else)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from rmc import infile

TIMEOUT_S = 15.0  # a command waits for the table's answer (5 s) inside the service


class ClientError(Exception):
    """The service refused the request, or could not be reached (one-line reason)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Client:
    def __init__(self, server: str, token: str | None) -> None:
        url = urllib.parse.urlsplit(server)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise ClientError(f"--server must be an http:// URL, not {server!r}")
        self.server = server.rstrip("/")
        self.token = token

    @classmethod
    def from_token_file(cls, server: str, path: str) -> Client:
        try:
            token = infile.read_text(path).strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ClientError(
                f"cannot read token file {path}: {getattr(e, 'strerror', None) or e}"
            ) from None
        if not token:
            raise ClientError(f"token file {path} is empty")
        return cls(server, token)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raise ClientError(_reason(e), e.code) from None
        except urllib.error.URLError as e:
            raise ClientError(f"cannot reach {self.server}: {e.reason}") from None
        except (TimeoutError, OSError) as e:
            raise ClientError(f"cannot reach {self.server}: {e}") from None
        except json.JSONDecodeError:
            raise ClientError(f"{self.server} did not answer JSON: is it rmc serve?") from None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def table(self, table: str) -> dict[str, Any]:
        return self.get(f"/api/tables/{_q(table)}")

    def results(self, table: str, last: int = 10) -> list[dict[str, Any]]:
        return self.get(f"/api/tables/{_q(table)}/results?last={last}")["results"]

    def command(self, table: str, verb: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """The table's answer: {"ok": bool, "detail", ...}; ClientError when there is none."""
        return self.request("POST", f"/api/tables/{_q(table)}/commands/{_q(verb)}", args or {})


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _reason(e: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(e.read() or b"{}")
    except (json.JSONDecodeError, OSError):
        body = {}
    detail = body.get("detail") or body.get("error") if isinstance(body, dict) else None
    if isinstance(detail, list):  # FastAPI's validation errors
        detail = "; ".join(str(d.get("msg", d)) for d in detail if isinstance(d, dict))
    return f"{e.code} {detail or e.reason}"
