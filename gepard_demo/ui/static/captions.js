// Captions (loaded in <head> after player.js): a Generate's words under the player, each segment's
// as soon as its audio is complete and aligned (GET /gepard/words/{job}, ui/captions.py), the word
// being spoken highlighted on the player's own clock (the live stream: the worklet's samples
// played; the finished audio: its media clock). A click on a timed word plays the full audio
// from that word. The same click works for any element with data-seek="seconds" inside a
// container whose data-audio-from names a Gradio Audio (the Eval tab's coloured words).
//
// window.gepardCaptions.stats is what the tests read: polls, the last answer, highlights
// ([clock seconds, word index, performance.now()] each time the lit word changed), arrivals
// ([performance.now(), words known] each time more words came: a word can be lit only after its
// segment's words have arrived), plays ([seconds, url]), stalls ([from s, to s, performance.now()]:
// where the clock moved more than STALL_S between two frames of the page, a word between unlit).
(function () {
  const STALL_S = 0.1;  // the highlight's clock moved this far between two frames: words may have been passed over
  const CFG = window.GEPARD_CAPTIONS_CONFIG || {};
  const PREFIX = CFG.wordsPrefix || 'gepard/words/';
  const RATE = (window.GEPARD_PLAYER_CONFIG || {}).sampleRate || 22050;
  const POLL_MS = 400;
  const GIVE_UP_MS = 60000;  // a job the server never knew (a refused Generate): stop asking

  function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
  }

  // The WAV a Gradio Audio shows (its download link, else its media element), if it is `jobId`'s.
  function wavUrl(from, jobId) {
    const root = document.querySelector(from);
    if (!root) return null;
    const link = root.querySelector('a[download], a[href*="gradio_api/file="]');
    const media = root.querySelector('audio');
    const url = (link && link.href) || (media && media.currentSrc) || null;
    return url && (!jobId || url.includes(jobId)) ? url : null;
  }

  class Captions {
    constructor() {
      this.jobId = null;
      this.data = null;
      this.audio = null;  // the element a click plays from
      this.active = -1;
      this.stats = {polls: 0, answer: null, highlights: [], arrivals: [], plays: [], stalls: [], note: null};
      this.lastT = null;
      this.loop = this.loop.bind(this);
      requestAnimationFrame(this.loop);
    }

    box() { return document.getElementById('gepard-captions'); }

    follow(jobId) {
      if (!jobId || jobId === this.jobId) return;
      this.jobId = jobId;
      this.data = null;
      this.active = -1;
      this.stats = {polls: 0, answer: null, highlights: [], arrivals: [], plays: [], stalls: [], note: null};
      this.lastT = null;
      this.render();
      this.poll(jobId);
    }

    async poll(jobId) {
      const since = performance.now();
      while (this.jobId === jobId) {
        try {
          const r = await fetch(PREFIX + encodeURIComponent(jobId), {cache: 'no-store'});
          if (r.ok) {
            const d = await r.json();
            if (this.jobId !== jobId) return;
            this.stats.polls += 1;
            this.stats.answer = d;
            const grew = !this.data || (d.words || []).length !== (this.data.words || []).length || d.state !== this.data.state;
            if ((d.words || []).length > ((this.data && this.data.words) || []).length) {
              this.stats.arrivals.push([performance.now(), d.words.length]);
            }
            this.data = d;
            if (grew) this.render();
            if (d.state === 'done' || d.state === 'off') return;
            if (d.state === 'unknown' && performance.now() - since > GIVE_UP_MS) return;
          }
        } catch (err) { /* the next poll tries again */ }
        await sleep(POLL_MS);
      }
    }

    render() {
      const box = this.box();
      if (!box) return;
      const d = this.data;
      if (!this.jobId || !d || d.state === 'unknown') {
        box.innerHTML = this.jobId ? '<div class="gepard-words-note">Words appear here as each part of the audio is complete…</div>' : '';
        return;
      }
      if (d.state === 'off') {
        box.innerHTML = `<div class="gepard-words-note">${esc(d.note)}</div>`;
        return;
      }
      const words = (d.words || []).map((w, i) => {
        const title = w.st === 'aligned' ? `${w.s.toFixed(2)}–${w.e.toFixed(2)} s · confidence ${w.c}`
          : w.st === 'low' ? `${w.s.toFixed(2)}–${w.e.toFixed(2)} s · low confidence: ${w.why}` : `unaligned: ${w.why}`;
        const seek = w.s === null ? '' : ` data-seek="${w.s}"`;
        return `<span class="gepard-w" data-i="${i}" data-state="${w.st}"${seek} title="${esc(title)}">${esc(w.w)}</span>`;
      }).join(' ');
      let note = d.summary || (d.state === 'pending' ? 'Aligning…' : '');
      if (d.state === 'pending') note += ` · ${d.segments.aligned} of ${d.segments.of} text segments aligned, the rest as their audio completes`;
      if ((d.notes || []).length) note += ' · ' + d.notes.join('; ');
      const timed = (d.words || []).some((w) => w.s !== null);
      const files = d.state === 'done' && timed
        ? ` · <a href="${PREFIX}${encodeURIComponent(this.jobId)}.srt" download>SRT</a>` +
          ` · <a href="${PREFIX}${encodeURIComponent(this.jobId)}.vtt" download>VTT</a>` : '';
      box.innerHTML = `<div class="gepard-words" data-audio-from="#gepard-audio" data-job="${esc(this.jobId)}">${words}</div>` +
        `<div class="gepard-words-note">Off the stream's path: ${esc(note)}${files}</div>`;
      this.active = -1;
    }

    // The clock of whatever plays this job's audio now, in seconds; null when nothing does.
    now() {
      if (this.audio && !this.audio.paused && this.audio.dataset.job === this.jobId) return this.audio.currentTime;
      const p = window.gepardPlayer;
      const heard = p && p.stats.jobId === this.jobId ? p.heardSeconds() : null;
      if (heard !== null) return heard;
      const media = document.querySelector('#gepard-audio audio');
      if (media && !media.paused && wavUrl('#gepard-audio', this.jobId)) return media.currentTime;
      return null;
    }

    loop() {
      requestAnimationFrame(this.loop);
      const p = window.gepardPlayer;
      if (p && p.stats.jobId) this.follow(p.stats.jobId);
      const words = (this.data && this.data.words) || [];
      const t = this.now();
      // A page that did not run for a while (a loaded host) passes over the words said meanwhile
      // without lighting them: the stalls say where (clock seconds from, to, performance.now()).
      if (t !== null && this.lastT !== null && t - this.lastT > STALL_S && this.stats.stalls.length < 200) {
        this.stats.stalls.push([this.lastT, t, performance.now()]);
      }
      if (t !== null) this.lastT = t;  // kept across a pause: a later play starts from where it left or was put (play)
      let at = -1;
      if (t !== null) at = words.findIndex((w) => w.s !== null && w.s <= t && t < Math.max(w.e, w.s + 0.05));
      if (at === this.active) return;
      const box = this.box();
      const old = box && box.querySelector('.gepard-w.gepard-now');
      if (old) old.classList.remove('gepard-now');
      const el = at >= 0 && box ? box.querySelector(`.gepard-w[data-i="${at}"]`) : null;
      if (el) el.classList.add('gepard-now');
      this.active = at;
      if (at >= 0 && this.stats.highlights.length < 2000) this.stats.highlights.push([t, at, performance.now()]);
    }

    // A click on a timed word: the full audio from there (the live stream cannot seek).
    play(from, seconds, jobId, line) {
      const url = wavUrl(from, jobId);
      if (!url) {
        this.stats.note = 'The full audio is playable when the stream has ended.';
        if (line) line.textContent = this.stats.note;
        return;
      }
      if (!this.audio) this.audio = new Audio();
      if (this.audio.src !== url) this.audio.src = url;
      this.audio.dataset.job = jobId || '';
      const start = () => {
        this.audio.currentTime = seconds;
        this.lastT = seconds;  // the clock starts here: a stall before the first frame is one too
        this.audio.play().catch(() => {});
      };
      if (this.audio.readyState >= 1) start(); else this.audio.addEventListener('loadedmetadata', start, {once: true});
      this.stats.plays.push([seconds, url]);
    }
  }

  const captions = new Captions();
  window.gepardCaptions = captions;
  document.addEventListener('click', (e) => {
    const el = e.target && e.target.closest && e.target.closest('[data-seek]');
    if (!el) return;
    const root = el.closest('[data-audio-from]');
    if (!root) return;
    e.preventDefault();
    const note = root.parentElement && root.parentElement.querySelector('.gepard-words-note');
    captions.play(root.dataset.audioFrom, Number(el.dataset.seek), root.dataset.job || null, note);
  });
})();
