"""One sentence rule for long text and for text that comes in pieces (streaming/text_splitter.py,
vLLM-Omni's): the dot of "Dr.", "e.g." or "U.S." ends no sentence, so where a boundary falls
right after one (a long text's segment edge, a streamed piece's end) the sentence stays whole
and the model speaks it as one utterance."""

from __future__ import annotations

import pytest
from tests.support.vllm_omni_reference import text_splitter

from gepard_demo.streaming.text_feed import write
from gepard_demo.streaming.text_input import SEGMENT_CHARS, split_text
from gepard_demo.streaming.text_splitter import TextSplitter, sentences

CASES = [("Dr.", "Smith came home."), ("e.g.", "apples were sold."), ("U.S.", "Army came home.")]


def _edge_at(abbreviation: str, rest: str) -> tuple[str, str]:
    """A long text whose first segment, were the abbreviation's dot a sentence end, would end at
    it: the filler and "We met <abbreviation>" fit in a segment, the whole sentence does not.
    Returns the text and the sentence."""
    sentence = f"We met {abbreviation} {rest}"
    room = SEGMENT_CHARS - len(f" We met {abbreviation}")  # what the filler may take
    filler = ("Filler words fill the first segment. " * 20)[: room - 1].rstrip() + "."
    assert len(filler) + 1 + len(sentence) > SEGMENT_CHARS >= len(filler) + len(f" We met {abbreviation}")
    return f"{filler} {sentence} And the text goes on.", sentence


@pytest.mark.parametrize("abbreviation,rest", CASES)
def test_a_long_texts_segment_never_ends_at_an_abbreviation(abbreviation, rest):
    text, sentence = _edge_at(abbreviation, rest)
    segments = split_text(text)
    assert len(segments) >= 2 and all(len(s) <= SEGMENT_CHARS for s in segments)
    assert " ".join(segments) == text
    assert not any(s.endswith(abbreviation) for s in segments), segments
    assert any(s.startswith(sentence) for s in segments[1:]), segments


@pytest.mark.parametrize("abbreviation,rest", CASES)
def test_streamed_pieces_cut_after_an_abbreviation_keep_its_sentence(abbreviation, rest):
    first, second = f"Hello there. We met {abbreviation}", f" {rest} Then we left."
    Wheel = text_splitter()
    for cut_pieces in ([first, second], [first + " ", second.lstrip()], list(first + second)):
        ours, theirs = TextSplitter("sentence"), Wheel("sentence")
        units = []
        for piece in cut_pieces:
            got = ours.feed(piece)
            assert got == theirs.feed(piece), piece
            units += got
        tail = ours.flush()
        assert tail == theirs.flush()
        assert units + tail == ["Hello there.", f"We met {abbreviation} {rest}", "Then we left."]


@pytest.mark.parametrize("abbreviation,rest", CASES)
def test_text_written_word_by_word_keeps_the_sentence(abbreviation, rest):
    text = f"Hello there. We met {abbreviation} {rest} Then we left."
    assert list(write(text, words_per_s=4).units) == sentences(text) == [
        "Hello there.", f"We met {abbreviation} {rest}", "Then we left."]


def test_long_text_ends_sentences_where_the_websocket_does():
    """Only . ! ? and the scripts' own marks end one, as vLLM-Omni's sentence cut: not ; or :."""
    sentence = "The first clause runs on; the second follows it: and a third ends it."
    assert split_text(" ".join([sentence] * 6), 100) == [sentence] * 6
