"""The page's API as a script uses it: README's `gradio_client` example, run as written against a
real `python app.py` process (tiny), /speak's named parameters and outputs as "Use via API" shows
them, and a job id that breaks the rule refused with the rule."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import soundfile as sf
from tests.support.app_fixtures import free_port, start_process, stop_process

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:7860/"


@pytest.fixture(scope="module")
def app_url(tiny_cache_dir, tmp_path_factory):
    port = free_port()
    env = {**os.environ, "GEPARD_CACHE_DIR": str(tiny_cache_dir)}
    log = tmp_path_factory.mktemp("speak-app") / "app.log"
    proc = start_process([sys.executable, "app.py", "--model", "tiny", "--no-eval-tab", "--no-captions",
                          "--port", str(port)], port, log, env)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        stop_process(proc)


def readme_example() -> str:
    """README's Python block that calls /speak."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if 'api_name="/speak"' in b]
    assert len(found) == 1, "README has one /speak example"
    return found[0]


def test_the_readmes_example_speaks(app_url):
    code = readme_example()
    assert README_URL in code  # the address `make demo` serves; here, this test's own port
    scope: dict = {}
    exec(compile(code.replace(README_URL, app_url), "README.md", "exec"), scope)
    wav, summary = scope["wav"], scope["summary"]
    audio, rate = sf.read(wav, dtype="float32")
    assert rate == 22050 and len(audio) > 0
    assert summary["seed"] == 42 and summary["frames"] > 0 and summary["status"].startswith("Done")
    assert abs(summary["audio_s"] - len(audio) / rate) < 0.01 and summary["ended"]
    assert re.fullmatch(r"[0-9a-f]{32}", summary["job_id"])  # none given: a fresh one


def test_speak_is_named_and_documented(app_url):
    from gradio_client import Client

    from gepard_demo.ui.page.endpoints import SPEAK_NAMES

    api = Client(app_url, verbose=False).view_api(return_format="dict", print_info=False)["named_endpoints"]["/speak"]
    params = {p["parameter_name"]: p for p in api["parameters"]}
    assert list(params) == [*SPEAK_NAMES, "job_id"] and "random_seed" not in params
    assert all(params[n]["parameter_has_default"] and params[n]["parameter_default"] is None for n in ("seed", "job_id"))
    assert params["temperature"]["parameter_default"] == 0.3  # the settings' declared default, as the page shows it
    assert [r["label"] for r in api["returns"]] == ["audio", "summary"]


def test_a_seed_replays_and_a_job_id_is_kept(app_url):
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    first = client.predict("Again and again.", seed=7, max_frames=12, job_id="my-run-0001", api_name="/speak")
    again = client.predict("Again and again.", seed=7, max_frames=12, api_name="/speak")
    assert first[1]["job_id"] == "my-run-0001" and first[1]["frames"] == 12
    assert (sf.read(first[0])[0] == sf.read(again[0])[0]).all()


@pytest.mark.parametrize("endpoint", ["/speak", "/generate"])
def test_a_bad_job_id_is_refused_with_the_rule(app_url, endpoint):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as err:
        Client(app_url, verbose=False).predict(text="Hi.", job_id="test-1", api_name=endpoint)
    assert "bad job id 'test-1': a job id is 8 to 64 characters, each a letter, a digit, '-' or '_'" in str(err.value)


def test_a_bad_setting_is_refused_naming_it(app_url):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=r"temperature must be in \(0, 5\], got 9"):
        Client(app_url, verbose=False).predict("Hi.", temperature=9, api_name="/speak")
