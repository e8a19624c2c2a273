"""The Eval tab's blind listening test (eval.listening): pick two or more runs, name the session and
yourself, and answer A, B or "same" for pairs of the same sentence and seed.

While a pair is asked nothing on the page says which run plays as A: the players get samples (a
file URL would name the run) and the runs are named only for pairs already answered, where each
side can be opened in the demo. The session lives on disk (<runs_dir>/listening/<name>/) and the
page remembers the session and listener in the browser (gr.BrowserState), so a reload, or another
day, goes on at the first pair this listener has not answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval.listening.session import ListeningError, Session, write_report

from .common import tab_error
from .demo_link import wire_open
from .runs_view import list_runs, wav_samples

if TYPE_CHECKING:
    import gradio as gr
    import numpy as np

    from gepard_demo.ui.page.speak_link import SpeakLink

SEP = "\t"


def ask(session: Session, who: str) -> tuple[int | None, str, tuple[int, np.ndarray] | None,
                                             tuple[int, np.ndarray] | None]:
    """(pair index or None, the line above the players, A's samples, B's samples) of who's next pair."""
    done, total = session.progress(who)
    pair = session.next_pair(who)
    if pair is None:
        return None, f"**{who}: all {total} pairs answered.** Thank you: the results are below.", None, None
    return (pair.index, f"Pair {done + 1} of {total} for **{who}**: *{pair.text}*", wav_samples(pair.a["wav"]),
            wav_samples(pair.b["wav"]))


def answered(session: Session, who: str) -> list[tuple[str, str]]:
    """(label, pair index) of the pairs `who` answered, newest first, runs named (they are no longer blind)."""
    out = []
    for v in reversed(session.votes()):
        if v["who"] == who:
            said = {"A": f"{v['a']} better", "B": f"{v['b']} better", "same": "same"}[v["choice"]]
            out.append((f"pair {v['pair']}: {v['id']}, A = {v['a']}, B = {v['b']}: {said}", str(v["pair"])))
    return out


def results(session: Session) -> str:
    return write_report(session).read_text()


def build_listening_section(runs_dir: str, speak: SpeakLink | None = None) -> dict[str, gr.Dropdown]:
    import gradio as gr

    with gr.Accordion("Blind listening test (A / B / same)", open=False, elem_id="eval-listening"):
        saved = gr.BrowserState({"session": "", "who": ""}, storage_key="gepard-eval-listening")
        with gr.Row():
            runs = gr.Dropdown(list_runs(runs_dir), multiselect=True, elem_id="eval-listen-runs",
                               label="Runs to compare (two or more; empty: resume the named session)")
            name = gr.Textbox(label="Session name", elem_id="eval-listen-session")
            who = gr.Textbox(label="Listener (your name or initials)", elem_id="eval-listen-who")
            seed = gr.Number(value=0, precision=0, minimum=0, label="Shuffle seed")
        start = gr.Button("Start or resume", elem_id="eval-listen-start")
        pair = gr.State(None)
        line = gr.Markdown(elem_id="eval-listen-line")
        with gr.Row():
            a_audio = gr.Audio(type="numpy", interactive=False, buttons=["download"], label="A", elem_id="eval-listen-a")
            b_audio = gr.Audio(type="numpy", interactive=False, buttons=["download"], label="B", elem_id="eval-listen-b")
        with gr.Row():
            pick_a = gr.Button("A is better", elem_id="eval-listen-pick-a")
            same = gr.Button("Same", elem_id="eval-listen-same")
            pick_b = gr.Button("B is better", elem_id="eval-listen-pick-b")
        with gr.Row():
            done = gr.Dropdown([], label="Your answered pairs (runs shown)", elem_id="eval-listen-done")
            open_a = gr.Button("Open its A in the demo", elem_id="eval-listen-open-a")
            open_b = gr.Button("Open its B in the demo", elem_id="eval-listen-open-b")
        note = gr.Markdown()
        report = gr.Markdown(elem_id="eval-listen-report")

    h = _Handlers(runs_dir)
    shown = [pair, line, a_audio, b_audio, done, report]
    start.click(h.start, [runs, name, who, seed], [saved, *shown], api_name="eval_listening_start")
    gr.on(triggers=None, fn=h.restore, inputs=[saved], outputs=[name, who, *shown], api_visibility="private")
    for button, choice in ((pick_a, "A"), (same, "same"), (pick_b, "B")):
        button.click(lambda s, i, c=choice: h.answer(s, i, c), [saved, pair], shown, api_visibility="private")

    wire_open(open_a, [saved, done], lambda s, d: h.side(s, d, "a"), speak, note, runs_dir)
    wire_open(open_b, [saved, done], lambda s, d: h.side(s, d, "b"), speak, note, runs_dir)
    return {"runs": runs}


class _Handlers:
    """The section's event handlers, on the sessions under one runs folder."""

    def __init__(self, runs_dir: str):
        self.runs_dir = runs_dir

    def _session(self, session_name: str, chosen: list[str] | None = None, shuffle: int = 0) -> Session:
        return Session.open(self.runs_dir, (session_name or "").strip(), chosen or None, int(shuffle or 0))

    @staticmethod
    def _show(session: Session, listener: str):
        import gradio as gr

        index, text, a, b = ask(session, listener)
        return index, text, a, b, gr.update(choices=answered(session, listener), value=None), results(session)

    def start(self, chosen, session_name, listener, shuffle):
        try:
            listener = (listener or "").strip()
            if not listener:
                raise ListeningError("say who is listening (a name or initials): votes are kept per listener")
            session = self._session(session_name, chosen, shuffle)
            return ({"session": session.folder.name, "who": listener}, *self._show(session, listener))
        except Exception as e:
            raise tab_error(e) from e

    def restore(self, state):
        """On load (and when the state changes): the session this browser had open, if any."""
        import gradio as gr

        if not state or not state.get("session") or not state.get("who"):
            return (gr.skip(),) * 8
        try:
            session = self._session(state["session"])
        except ListeningError:
            return (gr.skip(),) * 8  # the session is gone (another runs folder): start afresh
        return (state["session"], state["who"], *self._show(session, state["who"]))

    def answer(self, state, index, choice):
        try:
            if not state or not state.get("session") or index is None:
                raise ListeningError("start (or resume) a session first")
            session = self._session(state["session"])
            session.answer(state["who"], int(index), choice)
            return self._show(session, state["who"])
        except Exception as e:
            raise tab_error(e) from e

    def side(self, state, picked, side):
        """An answered pair's run on one side, and its utterance id (to open it in the demo)."""
        if not picked or not state or not state.get("session"):
            return None, None
        p = self._session(state["session"]).pairs[int(picked)]
        return p.a["run"] if side == "a" else p.b["run"], p.id
