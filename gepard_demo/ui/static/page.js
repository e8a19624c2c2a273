// Page behaviour around the player (loaded in <head> after player.js):
// - a live character count under the text box against the 2000-character limit;
// - Ctrl+Enter (Cmd+Enter) in the text box presses Generate;
// - while the live stream plays, the results say "generated, playing…" instead of "Done",
//   and the full-audio player is held back (so the two never talk over each other);
// - a click on Generate greys the previous results until the new request succeeds (an error
//   leaves them grey, marked as stale);
// - while a request waits for its turn, its place in line and the wait, next to the button;
// - a number typed into a slider's box outside the slider's range gets a note naming the field
//   and its range (Gradio clamps it on blur without a word).
(function () {
  const CFG = window.GEPARD_PAGE_CONFIG || {};
  const MAX_CHARS = CFG.maxChars || 2000;

  function $(sel) { return document.querySelector(sel); }

  function updateCount() {
    const box = $('#gepard-text textarea');
    const out = $('#gepard-charcount');
    if (!box || !out) return;
    const n = box.value.length;
    out.textContent = n + ' / ' + MAX_CHARS + ' characters' +
      (n > MAX_CHARS ? ' — too long by ' + (n - MAX_CHARS) + '; shorten it to generate' : '');
    out.dataset.over = n > MAX_CHARS ? '1' : '0';
  }

  document.addEventListener('input', (e) => {
    if (e.target && e.target.closest && e.target.closest('#gepard-text')) updateCount();
  }, true);

  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter' || !(e.ctrlKey || e.metaKey)) return;
    if (!(e.target && e.target.closest && e.target.closest('#gepard-text'))) return;
    e.preventDefault();
    const btn = $('#gepard-generate');
    if (btn) btn.click();
  }, true);

  // Out-of-range numbers: Gradio's slider box takes any typed number and clamps it to the
  // slider's range when it loses focus. Say so while typing, and what it was set to.
  function fieldName(input) {
    const label = (input.getAttribute('aria-label') || '').replace(/^number input for /, '');
    return label.split(' (')[0] || 'This setting';
  }

  function rangeNote(input) {
    const block = input.closest('[id^="gepard-"]');
    if (!block || input.min === '' || input.max === '') return;
    const typed = Number(input.value);
    const min = Number(input.min), max = Number(input.max);
    let note = block.querySelector('.gepard-range-note');
    const out = input.value !== '' && Number.isFinite(typed) && (typed < min || typed > max);
    if (!out) { if (note) note.remove(); return; }
    if (!note) {
      note = document.createElement('div');
      note.className = 'gepard-range-note';
      note.setAttribute('role', 'status');
      block.appendChild(note);
    }
    const bound = typed > max ? max : min;
    note.textContent = fieldName(input) + ': ' + input.value + ' is ' + (typed > max ? 'above the maximum ' : 'below the minimum ') +
      bound + ' (range ' + min + ' to ' + max + '); it is set to ' + bound + '.';
  }

  document.addEventListener('input', (e) => {
    const t = e.target;
    if (t && t.type === 'number' && t.closest && t.closest('[id^="gepard-"]')) rangeNote(t);
  }, true);

  // Pause any full-audio element when a new stream starts; a full-audio element that starts
  // playing stops the live stream.
  document.addEventListener('play', (e) => {
    if (e.target && e.target.closest && e.target.closest('#gepard-audio') && window.gepardPlayer &&
        window.gepardPlayer.isPlaying()) {
      window.gepardPlayer.stop('stopped');
    }
  }, true);

  function pauseFullAudio() {
    document.querySelectorAll('#gepard-audio audio').forEach((a) => { try { a.pause(); } catch (err) {} });
  }

  function setPlaying(on) {
    document.body.classList.toggle('gepard-playing', !!on);
  }

  function markStale(on) {
    const r = $('#gepard-results');
    if (r) r.classList.toggle('gepard-stale', !!on);
  }

  window.gepardPage = {
    onStart() { pauseFullAudio(); markStale(true); setPlaying(true); },
    onSuccess() { markStale(false); },
    onFailure() { setPlaying(false); },
    onPlayerEnd() { setPlaying(false); },
    // The Stop answer ("Stopping…") and the stopped generation's own last status race to the
    // page: the answer shows only if that status ("Stopped: …") has not come first.
    stopAnswered(line, status) {
      this.stopAnswers += 1;
      return String(status).startsWith('Stopped') ? status : line;
    },
    stopAnswers: 0,
    updateCount,
  };

  function init() {
    updateCount();
    if (window.gepardPlayer) {
      window.gepardPlayer.listeners.push((s) => {
        if (['ended', 'stopped', 'failed', 'error'].includes(s.state)) setPlaying(false);
      });
    }
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
  // Gradio renders after load: count once the box exists.
  const poll = setInterval(() => { if ($('#gepard-text textarea')) { updateCount(); clearInterval(poll); } }, 200);
})();
