"""The page's "Text normalization" controls through its public API (the page's Generate posts the
same): a text read by the rules and a request's lexicon is spoken exactly as the words it
became, typed as written; a bad lexicon is an error naming the control."""

from __future__ import annotations

import numpy as np
import pytest
from app_fixtures import args, client, generate_with_stream, live_demo, new_id, pcm_f32, tiny_codec  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow


def test_a_normalized_text_is_spoken_as_the_words_it_became(client, live_demo):
    said, said_pcm = generate_with_stream(client, live_demo.url, text="Gepard costs $5.50.", stop_threshold=0.99,
                                   text_normalization="rules", lexicon_entries="Gepard = gay pard")
    same, same_pcm = generate_with_stream(client, live_demo.url, text="gay pard costs five dollars fifty cents.",
                                               stop_threshold=0.99)
    written, written_pcm = generate_with_stream(client, live_demo.url, text="Gepard costs $5.50.",
                                                     stop_threshold=0.99)
    assert said[0].startswith("Done") and same[0].startswith("Done")
    # The whole budget each (the stop head cannot fire at 0.99), the same seed: only the prompt differs.
    normalized, plain, as_written = (pcm_f32(bytes(listener.data)) for listener in (said_pcm, same_pcm, written_pcm))
    assert len(normalized) == len(plain) == len(as_written)
    # Equal up to the one LSB a pooled codec call may move a sample by (docs/DESIGN.md, "What is exact").
    assert np.abs(normalized - plain).max() <= 1 / 32768
    assert np.abs(normalized - as_written).max() > 10 / 32768  # as written: another prompt, other audio


def test_a_bad_lexicon_is_an_error_naming_it(client, live_demo):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as err:
        client.predict(*args(new_id(), lexicon_entries="SQL = my SQL"), api_name="/generate")
    assert "lexicon_entries" in str(err.value) and "loops" in str(err.value)
