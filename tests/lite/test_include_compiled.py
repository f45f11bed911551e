"""`build.py --include-compiled`: numpy and pandas from Pyodide's CDN, checked against the
sha256 in Pyodide's lock, shipped in the site. The download is replaced by a test double for
the checksum logic; the real build is run against the real network, which here cannot reach
the CDN, so it must fail with one sentence and make nothing."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request

import pytest

from lite_build import build

CDN = "https://cdn.example.invalid/pyodide/v314.0.6/full"


def fake_lock(tmp_path, payloads):
    packages = {
        name: {
            "name": name,
            "version": "1.0",
            "file_name": f"{name}-1.0-cp314-cp314-pyemscripten_2026_0_wasm32.whl",
            "sha256": hashlib.sha256(data).hexdigest(),
            "depends": [],
        }
        for name, data in payloads.items()
    }
    path = tmp_path / "pyodide-lock.json"
    path.write_text(json.dumps({"packages": packages}))
    return path


def test_downloads_are_checked_against_the_lock_and_copied(tmp_path):
    payloads = {"numpy": b"numpy wheel bytes", "pandas": b"pandas wheel bytes"}
    lock = fake_lock(tmp_path, payloads)
    dest = tmp_path / "site"
    dest.mkdir()
    asked = []

    def fetch(url, target):
        asked.append(url)
        target.write_bytes(payloads[url.rsplit("/", 1)[1].split("-")[0]])

    got = build.include_compiled(lock, dest, CDN, fetch=fetch, cache=tmp_path / "cache")
    names = {n: json.loads(lock.read_text())["packages"][n]["file_name"] for n in payloads}
    assert got == names
    assert asked == [f"{CDN}/{names['numpy']}", f"{CDN}/{names['pandas']}"]  # the lock's exact URLs
    for name, data in payloads.items():
        assert (dest / names[name]).read_bytes() == data

    # a second build uses the checked cache: no download
    asked.clear()
    build.include_compiled(lock, dest, CDN, fetch=fetch, cache=tmp_path / "cache")
    assert asked == []


def test_a_download_with_the_wrong_sha256_is_refused_and_not_kept(tmp_path):
    lock = fake_lock(tmp_path, {"numpy": b"the real numpy", "pandas": b"the real pandas"})
    dest = tmp_path / "site"
    dest.mkdir()

    def tampered(url, target):
        target.write_bytes(b"something else")

    with pytest.raises(build.BuildError, match=r"numpy from .* has sha256 [0-9a-f]{64}, Pyodide's lock says"):
        build.include_compiled(lock, dest, CDN, fetch=tampered, cache=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
    assert list(dest.iterdir()) == []


def test_an_unreachable_cdn_is_one_sentence(tmp_path):
    lock = fake_lock(tmp_path, {"numpy": b"n", "pandas": b"p"})

    def unreachable(url, target):
        target.with_name(target.name + ".part").write_bytes(b"half")
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    with pytest.raises(build.BuildError) as info:
        build.include_compiled(lock, tmp_path, CDN, fetch=unreachable, cache=tmp_path / "cache")
    message = str(info.value)
    assert message.startswith("--include-compiled: Pyodide's CDN could not be reached for numpy")
    assert "\n" not in message and "Name or service not known" in message
    assert list((tmp_path / "cache").iterdir()) == []  # no half download left


def cdn_reachable() -> bool:
    from jupyterlite_pyodide_kernel.constants import PYODIDE_CDN_URL

    try:
        urllib.request.urlopen(
            urllib.request.Request(PYODIDE_CDN_URL + "/pyodide-lock.json", method="HEAD"), timeout=10
        ).close()
        return True
    except Exception:
        return False


def test_the_real_build_here_fails_with_one_sentence_and_makes_nothing(tmp_path, capsys):
    if cdn_reachable():  # a machine that can reach the CDN runs the full offline build instead
        out = tmp_path / "site"
        assert build.main(["--include-compiled", "--output-dir", str(out)]) == 0
        manifest = json.loads((out / build.MANIFEST_NAME).read_text())
        assert manifest["included_compiled"] == ["numpy", "pandas"] and manifest["cdn_packages"] == {}
        return
    out = tmp_path / "site"
    assert build.main(["--include-compiled", "--output-dir", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --include-compiled: Pyodide's CDN could not be reached for numpy"), err
    assert "\n" not in err
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no staging folder left either
