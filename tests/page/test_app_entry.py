"""`python app.py` as a user runs it: env vars, the offline fallback to tiny, the banner."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.app_fixtures import free_port, start_process, stop_process

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_app_falls_back_to_tiny_offline_and_says_why(tiny_cache_dir, tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "GEPARD_MODEL": "nineninesix/gepard-1.0",
        "HF_HUB_OFFLINE": "1",  # no weights here; be explicit so it fails fast everywhere
        "GEPARD_CACHE_DIR": str(tiny_cache_dir),
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
    }
    log = tmp_path / "app.log"
    proc = start_process([sys.executable, "app.py", "--no-eval-tab"], port, log, env)
    try:
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
        assert page.status_code == 200 and "GEPARD_PLAYER_CONFIG" in page.text
        config = httpx.get(f"http://127.0.0.1:{port}/config", timeout=30).text
        assert "random weights" in config and "makes noise" in config
        assert "nineninesix/gepard-1.0" in config and "did not load" in config
        assert "GEPARD_MODEL=DIR" in config
        # The worklet and a PCM route are served by the same server.
        assert httpx.get(f"http://127.0.0.1:{port}/gepard/pcm-worklet.js", timeout=10).status_code == 200
    finally:
        stop_process(proc)
    output = log.read_text()
    assert "Serving the random-weight 'tiny' model instead" in output, output


def test_traffic_flags_default_from_the_places_and_bad_ones_are_named(monkeypatch):
    from app import parse_args, traffic_from_args
    from gepard_demo.settings import SettingsError
    from gepard_demo.host_settings import LOOPBACK_PROXIES, PRIVATE_PROXIES

    monkeypatch.delenv("SPACE_ID", raising=False)
    traffic = traffic_from_args(parse_args([]), 4)
    assert (traffic.per_client, traffic.trusted_proxies) == (2, LOOPBACK_PROXIES)  # half the places for one visitor
    assert traffic_from_args(parse_args(["--per-client", "3"]), 4).per_client == 3
    assert traffic_from_args(parse_args([]), 1).per_client == 1
    with pytest.raises(SettingsError, match="per_client must be at least 1, got 0"):
        traffic_from_args(parse_args(["--per-client", "0"]), 4)
    monkeypatch.setenv("SPACE_ID", "someone/gepard")  # behind a Space's proxies, which name the visitor
    assert traffic_from_args(parse_args([]), 4).trusted_proxies == PRIVATE_PROXIES


def test_a_page_off_loopback_keeps_saved_voices_per_visitor(monkeypatch, tmp_path, capsys):
    """One shared library on an address anyone may reach would let each visitor delete the others'
    voices: off loopback the page keeps them per visitor (as --public does) and says so."""
    from app import is_loopback, parse_args, saved_voice_settings

    monkeypatch.delenv("SPACE_ID", raising=False)
    local = saved_voice_settings(parse_args(["--voices-dir", str(tmp_path)]), {})
    assert local.per_visitor is False and capsys.readouterr().err == ""
    for host in ("0.0.0.0", "192.0.2.7", "::", "example.org"):
        settings = saved_voice_settings(parse_args(["--host", host, "--voices-dir", str(tmp_path)]), {})
        assert settings.per_visitor is True and "each visitor has voices of their own" in capsys.readouterr().err
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"))
    public = saved_voice_settings(parse_args(["--public", "--voices-dir", str(tmp_path)]),
                                  {"GEPARD_VISITOR_SECRET": "kept-by-the-operator"})
    assert public.per_visitor is True and public.secret == "kept-by-the-operator"
