"""The admin routes are closed by default: a token, a Host naming the service, no foreign
Origin, JSON only. A web page the operator visits cannot switch mitigations."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from hotshard.errors import InputError
from hotshard.service.admin import (
    AdminGuard,
    check_admin_token,
    is_loopback,
    new_admin_token,
    service_names,
)
from tests.service._traffic import ROOT, _read_line, http_post, serve, wait_healthy

TOKEN = "t" * 24
GUARD = AdminGuard(TOKEN, service_names("127.0.0.1", 8080))
OK = {"host": "127.0.0.1:8080", "authorization": f"Bearer {TOKEN}",
      "content-type": "application/json"}


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("admin") / "data", "--shards", "2") as service:
        yield service


def _status(headers: dict, method: str = "POST") -> int | None:
    refusal = GUARD.refusal(headers, method)
    return None if refusal is None else refusal.status


@pytest.mark.parametrize(("changes", "status"), [
    ({}, None),
    ({"host": "localhost:8080"}, None),
    ({"host": "LOCALHOST:8080", "origin": "http://localhost:8080"}, None),
    ({"content-type": "application/json; charset=utf-8"}, None),
    ({"authorization": f"bearer {TOKEN}"}, None),
    ({"host": "evil.example:8080"}, 403),          # DNS rebinding
    ({"host": "127.0.0.1:9999"}, 403),
    ({"host": "127.0.0.1"}, 403),                   # port 80 implied
    ({"host": ""}, 403),
    ({"origin": "http://evil.example"}, 403),       # cross-site request
    ({"origin": "null"}, 403),
    ({"origin": "https://127.0.0.1:8080"}, 403),
    ({"authorization": ""}, 401),
    ({"authorization": f"Bearer {TOKEN}x"}, 401),
    ({"authorization": f"Basic {TOKEN}"}, 401),
    ({"content-type": "text/plain"}, 415),
    ({"content-type": "application/x-www-form-urlencoded"}, 415),
])
def test_guard_rules(changes, status):
    headers = {k: v for k, v in {**OK, **changes}.items() if v or k == "host"}
    assert _status(headers) == status


def test_guard_checks_origin_before_the_token_and_the_token_before_the_content_type():
    csrf = {"host": "127.0.0.1:8080", "origin": "http://evil.example",
            "content-type": "text/plain"}
    assert _status(csrf) == 403
    assert _status({**csrf, "origin": "http://127.0.0.1:8080"}) == 401
    assert _status({**OK, "content-type": "text/plain"}, method="GET") is None


def test_wildcard_bind_accepts_the_address_a_request_arrived_on():
    guard = AdminGuard(TOKEN, service_names("0.0.0.0", 8080))
    headers = {**OK, "host": "10.1.2.3:8080"}
    assert guard.refusal(headers, "POST").status == 403
    assert guard.refusal(headers, "POST", arrived_on=("10.1.2.3:8080",)) is None


def test_tokens():
    assert new_admin_token() != new_admin_token() and len(new_admin_token()) >= 32
    for bad in ("short", "has space in it here", "x" * 15, 42):
        with pytest.raises(InputError, match="admin_token"):
            check_admin_token(bad)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def test_a_cross_site_request_cannot_switch_mitigations(svc):
    """What a web page can send without a CORS preflight: text/plain, its own Origin, no
    token. Refused, and nothing changed."""
    before = svc.get("/admin/mitigations", headers=svc.admin_headers).json()
    r = svc.post("/admin/mitigations", content=b'{"coalesce": true, "replicas": 2}',
                 headers={"content-type": "text/plain", "origin": "http://evil.example"})
    assert r.status_code == 403 and "Origin" in r.json()["error"]
    r = svc.post("/admin/mitigations", content=b'{"coalesce": true}',
                 headers={"content-type": "text/plain"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert svc.get("/admin/mitigations", headers=svc.admin_headers).json() == before
    assert before["coalesce"] is False and before["replicas"] == 1


def test_wrong_host_no_token_wrong_token_and_text_are_refused(svc):
    port = svc.url.rsplit(":", 1)[1]
    body = {"coalesce": True}
    r = svc.post("/admin/mitigations", json=body,
                 headers={**svc.admin_headers, "host": f"rebound.example:{port}"})
    assert r.status_code == 403 and "Host" in r.json()["error"]
    assert svc.get("/admin/mitigations").status_code == 401
    r = svc.post("/admin/mitigations", json=body, headers={"authorization": "Bearer nope"})
    assert r.status_code == 401
    r = svc.post("/admin/mitigations", content=b'{"coalesce": true}',
                 headers={**svc.admin_headers, "content-type": "text/plain"})
    assert r.status_code == 415
    assert svc.get("/admin/mitigations", headers=svc.admin_headers).json()["coalesce"] is False


def test_the_token_switches_mitigations_and_the_chat_api_stays_open(svc):
    port = svc.url.rsplit(":", 1)[1]
    r = svc.post("/admin/mitigations", json={"coalesce": True},
                 headers={**svc.admin_headers, "host": f"localhost:{port}",
                          "origin": f"http://localhost:{port}"})
    assert r.status_code == 200 and r.json()["coalesce"] is True
    svc.post("/admin/mitigations", json={"coalesce": False}, headers=svc.admin_headers)
    r = svc.post("/channels/open/messages", json={"user": "a", "body": "b"},
                 headers={"host": "anything.example", "origin": "http://elsewhere.example"})
    assert r.status_code == 201  # the system under test: any load generator may drive it


def test_serve_generates_and_prints_a_token_when_none_is_given(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HOTSHARD_ADMIN_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hotshard", "serve", "--port", "0", "--shards", "1", "--data",
         str(tmp_path / "data")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**env, "PYTHONUNBUFFERED": "1"}, cwd=ROOT)
    try:
        url = _read_line(proc, 60)
        wait_healthy(url)
        token = None
        while token is None:
            line = proc.stderr.readline()
            assert line, "no admin token printed"
            if line.startswith("admin token: "):
                token = line.split()[2]
        assert len(token) >= 32
        r = http_post(url + "/admin/mitigations", json={"coalesce": True},
                      headers={"authorization": f"Bearer {token}"})
        assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_a_weak_admin_token_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hotshard", "serve", "--data",
                        str(tmp_path / "d")], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "HOTSHARD_ADMIN_TOKEN": "secret"}, timeout=60)
    assert r.returncode == 2 and "at least 16 characters" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "d").exists()


def test_a_body_nested_thousands_deep_is_a_400_not_a_500(svc):
    deep = b'{"channels": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"   # 10 KB, under the cap
    r = svc.post("/admin/mitigations", content=deep,
                 headers={**svc.admin_headers, "content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert "nested deeper" in r.json()["error"]
