"""The queue route's states are declared once (ui/jobs/queue_line.QueueState): the route answers only
those, the page hands their names to the player in its config, and the player reads exactly
those names from there, with no copy of its own. A state added, renamed or dropped on either side
fails here, not on a page whose wait line silently stops showing.

Also the player's scripts: every player*.js file is on the page, its parts before player.js."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from gepard_demo.ui.jobs.queue_line import QUEUE_STATES, queue_status
from gepard_demo.ui.page.layout import PAGE_SCRIPTS, PLAYER_SCRIPTS, page_head, player_config

UI = Path(__file__).resolve().parents[3] / "gepard_demo" / "ui" / "static"


def _code(name: str) -> str:
    """A script with its comments dropped (a comment may name a state in words)."""
    return re.sub(r"//.*", "", (UI / name).read_text(encoding="utf-8"))


def _registry(job=None, gone=None, progress=None, ahead=None, running=None):
    """The registry as queue_status reads it, for one id."""
    return SimpleNamespace(get=lambda _id: job, gone=lambda _id: gone, finished_progress=lambda _id: progress,
                           waiting_ahead=lambda _id: ahead, running=lambda: running)


def _job(finished=False, wait=None, progress=None):
    session = SimpleNamespace(wait_line=lambda: wait, progress=lambda: progress)
    return SimpleNamespace(session=session, finished=finished, last_progress=progress)


def test_the_queue_route_answers_every_declared_state_and_no_other():
    long_text = {"segments": 3, "ends_s": [1.0, 2.0, 3.0]}
    answers = [
        queue_status(_registry(job=_job(wait="waiting for a place in the batch")), "j", None),
        queue_status(_registry(job=_job(progress=long_text)), "j", None),
        queue_status(_registry(job=_job(finished=True, progress=long_text)), "j", None),
        queue_status(_registry(gone="its audio was all sent"), "j", None),
        queue_status(_registry(gone="its audio was all sent", progress=long_text), "j", None),
        queue_status(_registry(), "j", None),
        queue_status(_registry(ahead=0), "j", 2.0),
    ]
    assert [a["state"] for a in answers] == ["queued", "running", "finished", "gone", "finished", "unknown", "queued"]
    assert {a["state"] for a in answers} == set(QUEUE_STATES)
    assert answers[1]["long_text"] == long_text and answers[6]["position"] == 1


def test_the_page_hands_the_player_the_declared_states():
    config = player_config(22050)
    assert config["queueStates"] == list(QUEUE_STATES)
    assert '"queueStates": ' + str(list(QUEUE_STATES)).replace("'", '"') in page_head(22050)


def test_the_player_reads_exactly_the_declared_states_and_repeats_none():
    code = {name: _code(name) for name in PLAYER_SCRIPTS}
    read = {m for text in code.values() for m in re.findall(r"\bthis\.states\.(\w+)", text)}
    assert read == set(QUEUE_STATES), (f"the player reads queue states {sorted(read)}, the route declares "
                                       f"{sorted(QUEUE_STATES)} (queue_line.QueueState)")
    literal = re.compile(r"""['"](%s)['"]""" % "|".join(QUEUE_STATES))
    audio_context = re.compile(r"ctx\.state\s*[!=]==?\s*'running'")  # the AudioContext's own state, not the route's
    copies = {name: literal.findall(audio_context.sub("", text)) for name, text in code.items()}
    assert not any(copies.values()), f"queue states written as literals, not read from the config: {copies}"


def test_every_player_script_is_on_the_page_its_parts_first():
    on_disk = {p.name for p in UI.glob("player*.js")}
    assert set(PLAYER_SCRIPTS) == on_disk and PLAYER_SCRIPTS[-1] == "player.js"
    head = page_head(22050)
    at = [head.index((UI / name).read_text(encoding="utf-8")) for name in PAGE_SCRIPTS]
    assert at == sorted(at)
