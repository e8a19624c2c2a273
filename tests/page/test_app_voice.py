"""The demo's "Voice and guidance" group through the real Gradio server: a Piper-made example
voice as the reference, CFG controls, and a clear error for unusable reference audio."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from tests.support.app_fixtures import live_demo, tiny_codec  # noqa: F401  (fixtures)
from gepard_demo.ui.page.banner import banner_markdown
from gepard_demo.ui.page.voice import example_voices
from tests.support.app_fixtures import args, new_id

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(live_demo):  # noqa: F811
    from gradio_client import Client

    return Client(live_demo.url, verbose=False)


def test_example_voices_are_piper_recordings_inside_the_window():
    paths = example_voices()
    assert len(paths) == 3
    for p in paths:
        info = sf.info(p)
        assert 3.0 <= info.duration <= 15.0 and info.samplerate == 22050


def test_generate_in_an_example_voice_with_cfg(client, live_demo, tmp_path):
    from gradio_client import handle_file

    voice = example_voices()[1]
    plain = client.predict(*args(new_id(), max_frames=20), api_name="/generate")
    cloned = client.predict(*args(new_id(), max_frames=20, ref_audio=handle_file(voice), cfg_scale=2.5, cfg_frames=5),
                            api_name="/generate")
    assert cloned[0].startswith("Done"), cloned[0]
    a, b = sf.read(plain[1])[0], sf.read(cloned[1])[0]
    assert len(a) == len(b) and not np.allclose(a, b)  # same seed, another voice and guidance
    prefixer = live_demo.demo.controller.voices._prefixer
    misses = prefixer.misses
    again = client.predict(*args(new_id(), max_frames=20, ref_audio=handle_file(voice), cfg_scale=2.5, cfg_frames=5),
                           api_name="/generate")
    assert np.array_equal(sf.read(again[1])[0], b) and prefixer.misses == misses  # cached prefix, same audio


def test_unusable_reference_is_a_clear_error(client, tmp_path):
    from gradio_client import handle_file

    silent = tmp_path / "silent.wav"
    sf.write(silent, np.zeros(22050 * 5, np.float32), 22050)
    with pytest.raises(Exception, match="Reference voice.*silent"):
        client.predict(*args(new_id(), max_frames=5, ref_audio=handle_file(str(silent))), api_name="/generate")
    assert client.predict(*args(new_id(), max_frames=5), api_name="/generate")[0].startswith("Done")


def test_banner_says_a_cloned_voice_is_noise_on_tiny(live_demo):
    from gepard_demo.ui.hosts.model_host import ModelHost

    host = live_demo.demo.controller.host
    assert isinstance(host, ModelHost) and "A cloned voice is noise too" in banner_markdown(host)
