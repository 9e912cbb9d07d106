"""Issue 19's "private files" item outside the service: a --secret-file that its group or
others can read gets a warning (whoever reads the secret can recompute the pseudonyms)."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize(("mode", "warned"), [(0o600, False), (0o400, False), (0o644, True),
                                              (0o660, True)])
def test_a_secret_file_others_can_read_is_warned_about(tmp_path, mode, warned):
    keys = tmp_path / "keys.csv"
    keys.write_text("key\n" + "".join(f"{k}\n" for k in [1, 1, 1, 2, 2, 3, 4, 5, 6, 7] * 30))
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef0123456789abcdef")
    secret.chmod(mode)
    r = run_cli("profile", str(keys), "--key", "key", "--pseudonymize", "--secret-file",
                str(secret), "--partitioner", "kafka", "--shards", "4", "-o",
                str(tmp_path / "p.json"), "-q")
    assert r.returncode == 0, r.stderr
    assert ("readable or writable by others" in r.stderr) is warned, r.stderr
    if warned:
        assert f"mode {mode:04o}" in r.stderr and "chmod 600" in r.stderr
