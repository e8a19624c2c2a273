"""The authors' guardrails against derailment (facts §15): the repetition penalty and the force stop.

Both come from gepard-train's `GepardRunner.generate` with its names and semantics:

- `repetition_penalty` over `repetition_window` recent frames: per head, every code committed in
  the window (0 = all history) has its fp32 logit divided by the penalty when positive and
  multiplied by it when not; after guidance, before the sampler scales and truncates them
  (sampling.py). The first frame has no history, so it is never penalized.
- `force_stop_frames`: once an utterance has that many frames it ends, whatever the stop head
  says. "auto" scales it to the text as the authors' DPO rollouts cap their length
  (`adaptive_max_frames`): 4.0 x the expected frames, clamped to [80, 300], where the expected
  duration is their scorer's 0.7 + 0.4 s a word (`DPORewardConfig.expected_sec`, words = the
  text split on whitespace, at least one) at 21.5 frames a second. A long text's segments are
  each their own request, so each gets its own cap.

The penalty itself is penalty.py's (it needs torch); this module is plain Python, so the
streaming session and the thin client can check "auto" against a text without loading torch.
"""

from __future__ import annotations

from gepard_demo.settings import AUTO, SamplingSettings, SettingsError
from gepard_demo.units import FRAME_RATE_HZ, expected_speech_s, word_count

# The authors' rollout cap (conf/dpo/sampling/default.yaml): cap_expected_multiple, cap_min_frames,
# cap_max_frames. The expected duration is their scorer's (units.expected_speech_s).
AUTO_MULTIPLE = 4.0
AUTO_MIN_FRAMES = 80
AUTO_MAX_FRAMES = 300


def auto_force_stop(text: str) -> int:
    """force_stop_frames "auto" for `text`: 4 x its expected frames, clamped to [80, 300].

    A text with no letter or digit has no words to scale from (the authors' formula would take it
    as one word): refused, naming the field, rather than capped at a length that means nothing."""
    if not any(ch.isalnum() for ch in text):
        raise SettingsError(f"force_stop_frames {AUTO!r} scales the cap to the text's words, and {text!r} has none: "
                            "give a number of frames, or leave it off", "force_stop_frames")
    cap = int(AUTO_MULTIPLE * expected_speech_s(word_count(text)) * FRAME_RATE_HZ)
    return max(AUTO_MIN_FRAMES, min(AUTO_MAX_FRAMES, cap))


def force_stop_for(settings: SamplingSettings, text: str) -> int | None:
    """The frame count at which this request is force-stopped, or None (off). "auto" past the
    frame budget changes nothing: the budget ends the run first, and says so."""
    f = settings.force_stop_frames
    if f is None:
        return None
    return auto_force_stop(text) if f == AUTO else int(f)
