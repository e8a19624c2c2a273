"""The page's "Text normalization" controls through its public API (the page's Generate posts the
same): a text read by the rules and a request's lexicon is spoken exactly as the words it
became, typed as written; a bad lexicon is an error naming the control."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.app_fixtures import args, browser, client, generate_with_stream, live_demo, new_id, pcm_f32, tiny_codec  # noqa: F401  (fixtures)

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


def test_the_page_previews_what_the_model_will_read(client, live_demo):
    """The note under the text box (reading_preview.py), through the page's own API: the words the
    model reads, each changed run marked with what was written; nothing while the text is read as
    written; a bad lexicon said in the note, naming the control."""
    import html
    import re

    note = client.predict("Gepard costs $5.50.", "rules", "Gepard = gay pard", api_name="/preview_reading")
    assert "gay pard costs five dollars fifty cents." in html.unescape(re.sub(r"<[^>]+>", "", note))
    assert '<mark title="$5.50.">five dollars fifty cents.</mark>' in note
    assert client.predict("Gepard costs $5.50.", "off", "", api_name="/preview_reading") == ""
    only_lexicon = client.predict("Gepard costs $5.50.", "off", "Gepard = gay pard", api_name="/preview_reading")
    assert '<mark title="Gepard">gay pard</mark> costs $5.50.' in only_lexicon
    bad = client.predict("SQL is fine", "rules", "SQL = my SQL", api_name="/preview_reading")
    assert "lexicon_entries" in bad and "loops" in bad


def test_the_preview_shows_under_the_text_box_as_the_visitor_types(browser, live_demo):
    """In the browser: nothing under the text box while it is read as written; picking "rules"
    shows what the model reads, and it follows the text as it is edited, with no Generate."""
    from tests.page.test_app_page import open_page

    ctx, page, errors = open_page(browser, live_demo.url)
    try:
        preview = page.locator("#gepard-reading-preview")
        assert preview.inner_text().strip() == ""
        page.locator("#gepard-text textarea").fill("Call 555-0142 at 9:30 a.m.")
        page.get_by_text("Text normalization: how numbers").click()
        page.locator("#gepard-text-normalization").get_by_text("rules", exact=True).click()
        page.wait_for_function("() => document.querySelector('#gepard-reading-preview').innerText"
                               ".includes('five five five, zero one four two at nine thirty a m.')", timeout=20_000)
        assert preview.locator("mark").first.get_attribute("title") == "555-0142"
        text_box, note = page.locator("#gepard-text textarea").bounding_box(), preview.bounding_box()
        assert note["y"] >= text_box["y"] + text_box["height"] and note["y"] < text_box["y"] + text_box["height"] + 120
        page.locator("#gepard-text textarea").fill("It is $5.50.")
        page.wait_for_function("() => document.querySelector('#gepard-reading-preview').innerText"
                               ".includes('five dollars fifty cents')", timeout=20_000)
    finally:
        ctx.close()
    assert not errors, errors


def test_a_bad_break_is_a_text_error_naming_input_and_a_good_one_is_silence(client, live_demo):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as err:
        client.predict(*args(new_id(), text='Hello there. <break time="9s"/> Goodbye.'), api_name="/generate")
    assert "input" in str(err.value) and "at most 5 s" in str(err.value)
    said, pcm = generate_with_stream(client, live_demo.url, text='Hello there. <break time="500ms"/> Goodbye.',
                                     stop_threshold=0.99)
    assert said[0].startswith("Done")
    samples = pcm_f32(bytes(pcm.data))
    zero = np.concatenate([[0], (samples == 0).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(zero))
    assert int((edges[1::2] - edges[::2]).max()) >= 11025  # the break's 0.5 s, exact zeros, in the stream


def test_the_preview_says_where_a_break_falls_and_names_a_bad_one(client, live_demo):
    note = client.predict('Call at 9:30 a.m. <break time="1.5s"/> Thanks.', "rules", "", api_name="/preview_reading")
    assert "<em>[1.5 s of silence]</em> Thanks." in note and "break" not in note  # the tag is not read
    bad = client.predict('Call me. <break time="9s"/> Thanks.', "off", "", api_name="/preview_reading")
    assert bad.startswith('<div class="gepard-words-note" role="status">input: ') and "at most 5 s" in bad
