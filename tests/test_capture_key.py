"""``blocklab capture --anonymize-key``: the key file and the keyed hashes. Unlike the rest of
the capture tests (tests/test_capture.py) these need neither root, nor fio, nor a loop device,
so they run on every machine."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from blocklab.pipeline.capture import anonymized, load_key
from blocklab.traces.errors import BlocklabError


def test_anonymize_key(tmp_path):
    """--anonymize-key: the key file is made once (32 random bytes, owner-only), then read back;
    keyed hashes are stable under one key, differ between keys and from the unkeyed hash, and
    a key file others may read or one too short is refused in one line naming the file."""
    path = tmp_path / "names.key"
    key = load_key(path)
    assert len(key) == 32 and (path.stat().st_mode & 0o777) == 0o600
    assert load_key(path) == key  # read back, not made again
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left
    want = "anon-" + hmac.new(key, b"postgres", hashlib.sha256).hexdigest()[:12]
    assert anonymized("postgres", key) == want == anonymized("postgres", key)
    assert anonymized("postgres", load_key(tmp_path / "other.key")) != want
    assert anonymized("postgres") != want
    path.chmod(0o644)
    with pytest.raises(BlocklabError) as e:
        load_key(path)
    assert str(e.value) == f"{path}: the key file may be read by others (mode 0644); chmod 600 it"
    short = tmp_path / "short.key"
    short.write_bytes(b"0123456789")
    short.chmod(0o600)
    with pytest.raises(BlocklabError) as e:
        load_key(short)
    assert str(e.value).startswith(f"{short}: byte 10: ") and "\n" not in str(e.value)
    with pytest.raises(BlocklabError, match="cannot create the key file"):
        load_key(tmp_path / "no-such-folder" / "k.key")
