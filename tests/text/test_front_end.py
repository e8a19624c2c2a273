"""The text front end (gepard_demo/text): our rules layer on the classes a visitor types often,
the mapping back from spoken words to written tokens, the pronunciation lexicon and its refusals,
the `normalize` command, and `text_normalization` as a declared setting on every surface that
derives from the declaration. NeMo's own reading: tests/text/test_nemo.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gepard_demo.settings import SamplingSettings, SettingsError, StreamSettings
from gepard_demo.text import rules
from gepard_demo.text.front_end import FrontEnd
from gepard_demo.text.lexicon import MAX_ENTRIES, LexiconError, parse
from gepard_demo.text.numbers import cardinal, ordinal
from gepard_demo.text.pieces import Piece, split, spoken_text

ROOT = Path(__file__).resolve().parents[2]
PLS = """<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
  <lexeme><grapheme>SQL</grapheme><alias>sequel</alias></lexeme>
  <lexeme><grapheme>Gepard</grapheme><grapheme>GEPARD</grapheme><alias>gay pard</alias></lexeme>
  <lexeme><grapheme>W3C</grapheme><alias>World Wide Web Consortium</alias></lexeme>
</lexicon>"""


def ours(text: str) -> str:
    """Our layer alone (what runs before the library in the nemo mode)."""
    return spoken_text(rules.apply(split(text)))


@pytest.mark.parametrize("written, spoken", [
    ("Call 555-0142 now.", "Call five five five, zero one four two now."),
    ("Call (555) 123-4567.", "Call five five five, one two three, four five six seven."),
    ("Call 555.123.4567 today", "Call five five five, one two three, four five six seven today"),
    ("before 9:30 a.m. on Monday", "before nine thirty a m on Monday"),
    ("at 5 p.m. Then we go", "at five p m. Then we go"),
    ("at 7:05pm sharp", "at seven oh five p m sharp"),
    ("It costs $5.50 today", "It costs five dollars fifty cents today"),
    ("only $1.01 or $0.50", "only one dollar one cent or fifty cents"),
    ("a £3.05 ticket, €1", "a three pounds five pence ticket, one euro"),
    ("$1,200 in all", "one thousand two hundred dollars in all"),
    ("the 21st and the 2nd", "the twenty first and the second"),
    ("the 12th time, the 100th", "the twelfth time, the one hundredth"),
    ("pages 28-30", "pages 28 to 30"),
    ("pages 28 – 30", "pages 28 to 30"),
])
def test_our_layer_reads_what_visitors_type_often(written, spoken):
    assert ours(written) == spoken


@pytest.mark.parametrize("written", ["35-20=15", "2008-09-30", "v1.2-3", "ISBN 0-19-852663-6"])
def test_a_hyphen_that_is_no_range_is_left_to_the_library(written):
    assert ours(written) == written


def test_the_rules_mode_reads_every_number_and_symbol():
    front = FrontEnd()
    said = front.spoken("In 1984 we paid 50% of 2.5 million & met at 14:00, 1624-1713.", "rules")
    assert said == ("In nineteen eighty four we paid fifty percent of two point five million and met at "
                    "fourteen hundred, sixteen twenty four to seventeen thirteen.")
    assert not any(ch.isdigit() for ch in said)


def test_numbers_as_words():
    assert cardinal(0) == "zero" and cardinal(1234) == "one thousand two hundred thirty four"
    assert cardinal(2_000_017) == "two million seventeen"
    assert [ordinal(n) for n in (1, 2, 3, 5, 9, 12, 20, 21, 100)] == [
        "first", "second", "third", "fifth", "ninth", "twelfth", "twentieth", "twenty first", "one hundredth"]


def test_each_written_token_maps_to_the_words_it_became():
    reading = FrontEnd().read("Call Dr. Smith at 555-0142 before 9:30 a.m. on the 3rd.", "rules")
    assert reading.written == "Call Dr. Smith at 555-0142 before 9:30 a.m. on the 3rd."
    assert [p for p in reading.pieces if p.changed] == [
        Piece("555-0142", "five five five, zero one four two"), Piece("9:30 a.m.", "nine thirty a m"),
        Piece("3rd.", "third.")]
    assert reading.spoken == "Call Dr. Smith at five five five, zero one four two before nine thirty a m on the third."


def test_off_is_the_text_as_written():
    text = "It costs $5.50 at 9:30 a.m."
    assert FrontEnd().spoken(text, "off") == text


def test_a_pls_lexicon_is_whole_words_and_case_sensitive():
    lex = parse(PLS)
    front = FrontEnd(lexicon=lex)
    said = front.spoken("Gepard and GEPARD read SQL, not sql nor SQLite; the W3C says so.", "off")
    assert said == "gay pard and gay pard read sequel, not sql nor SQLite; the World Wide Web Consortium says so."


def test_a_request_lexicon_extends_and_overrides_the_servers():
    front = FrontEnd(lexicon=parse("SQL = sequel\nGUI = gooey"))
    assert front.spoken("SQL GUI", "off", parse("SQL = S Q L")) == "S Q L gooey"


def test_the_lexicon_comes_before_the_normaliser():
    front = FrontEnd(lexicon=parse("B2B = business to business"))
    assert front.spoken("B2B sales rose 5%", "rules") == "business to business sales rose five percent"


@pytest.mark.parametrize("text, words", [
    (PLS.replace("<alias>sequel</alias>", '<phoneme>ˈsiːkwəl</phoneme>'), "Gepard reads text, not phonemes"),
    ('<speak xmlns="http://www.w3.org/2001/10/synthesis"/>', "is not PLS"),
    ("<lexicon", "not well-formed XML"),
    ("SQL sequel", "is not 'written = spoken'"),
    ("SQL = my SQL", "loops"),
    ("SQL = ", "both sides must say something"),
    ("\n".join(f"w{i} = x" for i in range(MAX_ENTRIES + 1)), f"at most {MAX_ENTRIES}"),
    ("x = y\n" * 40_000, "characters; at most"),
    ('<!DOCTYPE lexicon [<!ENTITY a "aaaa">]><lexicon/>', "DOCTYPE"),
])
def test_a_bad_lexicon_is_refused_naming_the_field(text, words):
    with pytest.raises(LexiconError) as e:
        parse(text, "lexicon")
    assert words in str(e.value) and e.value.field == "lexicon" and str(e.value).startswith("lexicon")


def test_the_normalize_command_prints_one_line_for_each_line_in(tmp_path):
    lexicon = tmp_path / "words.pls"
    lexicon.write_text(PLS, encoding="utf-8")
    lines = "It costs $5.50.\n\nSQL at 9:30 a.m.\n"
    out = subprocess.run([sys.executable, "-m", "gepard_demo", "normalize", "--text-normalization", "rules",
                          "--lexicon", str(lexicon)], input=lines, capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["It costs five dollars fifty cents.", "", "sequel at nine thirty a m."]
    bad = subprocess.run([sys.executable, "-m", "gepard_demo", "normalize", "--lexicon", str(tmp_path / "none")],
                         input="x\n", capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "--lexicon" in bad.stderr


def test_text_normalization_is_declared_once_and_every_surface_derives_it():
    from gepard_demo.__main__ import build_parser
    from gepard_demo.serving.cloning import EXTENSION_FIELDS
    from gepard_demo.settings import EXTENSION_GROUPS
    from gepard_demo.settings_flags import setting_args
    from gepard_demo.ui.page.controls import CONTROL_NAMES, parse_controls

    assert SamplingSettings().text_normalization == "off"  # the default until the real weights say otherwise
    for cmd in ("synth", "serve"):
        args = build_parser().parse_args([cmd, "--text-normalization", "rules"] + (["x"] if cmd == "synth" else []))
        assert args.text_normalization == "rules"
    # the API's last controls: old clients' positions stay
    assert CONTROL_NAMES[-2:] == ("text_normalization", "lexicon_entries")
    assert parse_controls({"text_normalization": "rules"})[0].text_normalization == "rules"
    assert EXTENSION_GROUPS["normalization"] == ("text_normalization", "lexicon_entries")
    assert {"text_normalization", "lexicon_entries"} <= set(EXTENSION_FIELDS)
    line = " ".join(setting_args(SamplingSettings(text_normalization="rules"), StreamSettings()))
    assert "--text-normalization rules" in line  # a take's synth line
    with pytest.raises(SettingsError) as e:
        SamplingSettings(text_normalization="loud").validate()
    assert e.value.field == "text_normalization"


def test_a_requests_lexicon_entries_are_a_declared_setting_checked_naming_it():
    from gepard_demo.__main__ import build_parser
    from gepard_demo.ui.page.controls import parse_controls

    args = build_parser().parse_args(["synth", "x", "--lexicon-entries", "SQL = sequel; GUI = gooey"])
    assert args.lexicon_entries == "SQL = sequel; GUI = gooey"
    assert parse_controls({"lexicon_entries": None})[0].lexicon_entries == ""  # the page's empty box
    assert "--lexicon-entries" not in " ".join(setting_args_of(SamplingSettings()))  # empty: left out
    for entries, words in (("SQL = my SQL", "loops"), ("SQL sequel", "is not 'written = spoken'"),
                           (PLS.replace("<alias>sequel</alias>", "<phoneme>x</phoneme>"), "not phonemes")):
        with pytest.raises(SettingsError) as e:
            parse_controls({"lexicon_entries": entries})
        assert e.value.field == "lexicon_entries" and words in str(e.value)


def setting_args_of(sampling: SamplingSettings) -> list[str]:
    from gepard_demo.settings_flags import setting_args

    return setting_args(sampling, StreamSettings())


def test_eval_runs_and_sweeps_take_it():
    from eval.parser import build_parser as eval_parser
    from eval.sweeps.grid import parse_axes
    from gepard_demo.settings_flags import settings_from_args

    for cmd in (["run", "--set", "smoke", "--out", "x"], ["sweep", "--out", "x"]):
        args = eval_parser().parse_args(cmd + ["--text-normalization", "rules", "--lexicon-entries", "SQL = sequel"])
        sampling, _ = settings_from_args(args, SamplingSettings(), StreamSettings())
        assert (sampling.text_normalization, sampling.lexicon_entries) == ("rules", "SQL = sequel")
    assert parse_axes(["text_normalization=off,rules"]) == (("text_normalization", ("off", "rules")),)
