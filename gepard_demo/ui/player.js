// Gepard streaming player: fetches a job's raw PCM from the same origin and feeds an
// AudioWorklet, so playback starts on the first chunk and chunks play back to back.
//
// Exposed as window.gepardPlayer. `start()` is called from the Generate button's js hook
// (it returns the new job id, which the Python side then produces into); `stop()` from
// Stop. `stats` is what the tests and the latency benchmark read:
//   clickAt, firstByteAt, firstPlayAt (performance.now() ms; firstPlayAt is when the first
//   sample reached the output, from the worklet's frame clock), clickToSoundMs,
//   samplesReceived, samplesPlayed (playedHeardAt: when the last of them is heard), underruns,
//   gapMs, outputPeak (largest |sample| seen at the output tap), state, contextState;
//   startBufferMs (queued when the audio thread began), readyBufferMs and startPrebufferMs (queued
//   when it decided to start, and what it held for); arrivals ([time, samples received]) and gaps
//   ({atS, ms, receivedS, at, starvedAt}: where each was heard); heardWaits (text written as it
//   comes: each sentence's wait from its last word to its sound, s).
(function () {
  const CFG = window.GEPARD_PLAYER_CONFIG || {};
  const SAMPLE_RATE = CFG.sampleRate || 22050;
  const PCM_PREFIX = CFG.pcmPrefix || '/gepard/pcm/';
  const WORKLET_URL = CFG.workletUrl || '/gepard/pcm-worklet.js';
  const QUEUE_PREFIX = CFG.queuePrefix || 'gepard/queue/';
  const GAIN = CFG.gain || 1.0;  // below 1 on random-weight models: their noise plays quieter
  const SEGMENT_CHARS = CFG.segmentChars || 400;  // a text longer than this may be split into segments (text_input.py)

  // The authors' scorer's expected length of an utterance (units.expected_speech_s: 0.7 s + 0.4 s
  // a word, at least one word; its constants come with the config).
  const EXPECTED = CFG.expected || {baseS: 0.7, perWordS: 0.4};
  function expectedSeconds(words) { return EXPECTED.baseS + EXPECTED.perWordS * Math.max(1, words); }
  const MEASURE_S = 0.25;  // the automatic start buffer measures a stream's pace over this long at least
  const PACE_MARGIN = 1.25;  // ... and plans for a pace this much slower (autoBuffer)
  const UNKNOWN_POLLS = 5;  // a long text's progress: 'unknown' answers in a row (100 ms apart) before it gives up (watchText)

  function newJobId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    // Plain-http pages on a LAN address have no randomUUID (not a secure context).
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  function freshStats(jobId) {
    return {
      jobId, state: jobId ? 'connecting' : 'idle', clickAt: null, responseAt: null,
      firstByteAt: null, firstPlayAt: null, doneAt: null, clickToSoundMs: null,
      samplesReceived: 0, samplesPlayed: 0, playedHeardAt: null, underruns: 0, gapMs: 0, outputPeak: 0, error: null,
      contextState: null, sampleRate: SAMPLE_RATE, outputLatencyMs: null, startBufferMs: null,
      readyBufferMs: null, startPrebufferMs: null,
      streamDone: false, queue: null, auto: null, arrivals: [], longText: null, gaps: [], heardWaits: [],
    };
  }

  class GepardPlayer {
    constructor() {
      this.ctx = null;
      this.node = null;
      this.ready = null;
      this.abort = null;
      this.jobId = null;
      this.stats = freshStats(null);
      this.history = [];  // stats of finished jobs, newest last (tests read it)
      this.listeners = [];
    }

    // Build the audio graph once. The context may start 'suspended' before any user
    // gesture; resume() on the first pointer/key event (or the click) unlocks it.
    init() {
      if (this.ready) return this.ready;
      this.ready = (async () => {
        this.ctx = new AudioContext({sampleRate: SAMPLE_RATE, latencyHint: 'interactive'});
        await this.ctx.audioWorklet.addModule(WORKLET_URL);
        this.node = new AudioWorkletNode(this.ctx, 'gepard-pcm-player',
          {numberOfInputs: 0, numberOfOutputs: 1, outputChannelCount: [1]});
        this.gain = new GainNode(this.ctx, {gain: GAIN});
        this.node.connect(this.gain);
        this.gain.connect(this.ctx.destination);
        // A tap after the gain, independent of the worklet's own counters: proves that
        // non-silent samples reach the output (stats.outputPeak), sampled every 50 ms while playing.
        this.analyser = new AnalyserNode(this.ctx, {fftSize: 2048});
        this.gain.connect(this.analyser);
        this.tapBuf = new Float32Array(this.analyser.fftSize);
        setInterval(() => this.sampleOutput(), 50);
        this.node.port.onmessage = (e) => this.onWorklet(e.data);
      })();
      this.ready.catch((err) => { this.stats.error = String(err); this.render(); });
      return this.ready;
    }

    unlock() {
      this.init().then(() => { if (this.ctx.state !== 'running') return this.ctx.resume(); })
        .catch(() => {});
    }

    // Called inside the Generate click: returns the job id the server will produce into.
    start(opts) {
      const clickAt = performance.now();
      this.stop('replaced');
      const jobId = newJobId();
      this.jobId = jobId;
      this.stats = freshStats(jobId);
      this.stats.clickAt = clickAt;
      const auto = !!(opts && opts.auto);
      // Auto: hold everything until the stream's rate says how much must be buffered (autoBuffer).
      const prebuffer = auto ? 1 << 30 : Math.round(((opts && opts.prebufferMs) || 0) * SAMPLE_RATE / 1000);
      this.stats.auto = auto ? {expectedS: expectedSeconds((opts && opts.words) || 0), rate: null, hint: null,
                                needS: null, pushes: 0, firstChunkS: null, basis: null, plans: [],
                                maybeLong: ((opts && opts.chars) || 0) > SEGMENT_CHARS} : null;
      const controller = new AbortController();
      this.abort = controller;
      this.render();
      this.watchQueue(jobId, controller.signal);
      // Resume inside the user gesture (autoplay policy), then stream.
      this.init().then(() => {
        if (this.ctx.state !== 'running') this.ctx.resume();
        this.node.port.postMessage({type: 'reset', jobId, prebuffer});
        return this.pump(jobId, controller.signal);
      }).catch((err) => {
        if (this.jobId !== jobId || controller.signal.aborted) return;
        this.stats.state = 'error';
        this.stats.error = String(err);
        this.render();
      });
      return jobId;
    }

    isPlaying() {
      return !!this.jobId && ['connecting', 'buffering', 'playing'].includes(this.stats.state);
    }

    // While no audio has come, ask where the request stands (place in line, wait estimate).
    async watchQueue(jobId, signal) {
      await new Promise((r) => setTimeout(r, 400));  // a request that starts at once never shows a wait
      while (this.jobId === jobId && !signal.aborted && this.stats.firstByteAt === null) {
        try {
          const r = await fetch(QUEUE_PREFIX + encodeURIComponent(jobId), {signal, cache: 'no-store'});
          if (r.ok) {
            const q = await r.json();
            if (this.jobId !== jobId) return;
            this.stats.queue = q.state === 'queued' ? q : null;
            this.render();
          }
        } catch (err) { return; }
        await new Promise((r) => setTimeout(r, 1000));
      }
      if (this.jobId === jobId) { this.stats.queue = null; this.render(); }
    }

    // A long text (several segments): while it streams, ask how far its later segments are (made
    // ahead of playback, in the same batch): the start buffer and the line below read it; a text
    // written as it comes, where each sentence ends in the audio (its wait). A running text of one
    // segment answers without `long_text` and the polling stops; a finished job answers its last
    // progress once ('finished', also once all its audio was sent and let go). A later segment
    // waiting in the engine's queue answers 'queued', and a job whose audio was all sent can be
    // let go a moment before its last progress is kept ('unknown'): neither ends the polling,
    // which runs until the finished answer (or a few unknowns in a row: a job not kept).
    async watchText(jobId, signal) {
      let unknown = 0;
      while (this.jobId === jobId && !signal.aborted) {
        try {
          const r = await fetch(QUEUE_PREFIX + encodeURIComponent(jobId), {signal, cache: 'no-store'});
          if (!r.ok) return;
          const q = await r.json();
          if (this.jobId !== jobId) return;
          unknown = q.state === 'unknown' ? unknown + 1 : 0;
          if (q.long_text) {
            this.stats.longText = q.long_text;
            if (this.stats.auto && this.stats.firstPlayAt === null) this.autoBuffer(jobId);
            this.noteHeard();
            this.render();
          }
          const over = q.state === 'finished' || q.state === 'gone';  // 'gone': let go with no progress kept
          if (over || (q.state === 'running' && !q.long_text) || unknown > UNKNOWN_POLLS) return;
        } catch (err) { return; }
        await new Promise((r) => setTimeout(r, unknown ? 100 : 500));
      }
    }

    // Text written as it comes (FeedSettings "as written"): each sentence's wait from its last word
    // (written_s after the request's start, about the click) to its first sound, once its first
    // sample has played (when it was heard: heardAt, from the worklet's frame clock).
    noteHeard() {
      const s = this.stats, t = s.longText;
      if (!t || !t.written_s || s.firstPlayAt === null) return;
      const played = s.samplesPlayed / SAMPLE_RATE;
      while (s.heardWaits.length < t.segments) {
        const k = s.heardWaits.length;
        const start = k === 0 ? 0 : t.ends_s[k - 1];
        if (start === undefined || played <= start) break;
        const at = k === 0 ? s.firstPlayAt : this.heardAt(start);
        s.heardWaits.push(Math.max(0, (at - s.clickAt) / 1000 - t.written_s[k]));
      }
    }

    // When (performance.now() time) the stream's second `pos` is heard, pos within what has played
    // (no gap since: a gap puts it earlier than it was).
    heardAt(pos) {
      return this.stats.playedHeardAt - (this.stats.samplesPlayed / SAMPLE_RATE - pos) * 1000;
    }

    // The stream's second being heard now: what the worklet has played, less what is still on its
    // way to the output (captions.js lights the word said there); null when none of it is heard
    // now (not started, stopped, or its last sample heard: an ended stream is still heard until then).
    heardSeconds() {
      const s = this.stats;
      if (s.playedHeardAt === null || !['playing', 'ended'].includes(s.state)) return null;
      const played = s.samplesPlayed / SAMPLE_RATE, left = (s.playedHeardAt - performance.now()) / 1000;
      if (s.state === 'ended' && left <= 0) return null;
      return Math.max(0, Math.min(played, played - left));
    }

    // Segments wholly generated after the one now playing (its end in the stream: ends_s).
    readyAhead() {
      const t = this.stats.longText;
      if (!t) return null;
      const played = this.stats.samplesPlayed / SAMPLE_RATE;
      const playing = t.ends_s.filter((e) => e <= played).length;
      return {ready: t.generated.filter((g, i) => g && i > playing).length, after: t.segments - playing - 1,
              segments: t.segments, done: t.generated.filter((g) => g).length};
    }

    async pump(jobId, signal) {
      const resp = await fetch(PCM_PREFIX + encodeURIComponent(jobId), {signal, cache: 'no-store'});
      if (!resp.ok) throw new Error('audio stream: HTTP ' + resp.status);
      this.stats.responseAt = performance.now();
      if (this.stats.auto) {
        const hint = Number(resp.headers.get('X-Gepard-Speed'));
        this.stats.auto.hint = Number.isFinite(hint) && hint > 0 ? hint : null;
      }
      const reader = resp.body.getReader();
      let carry = new Uint8Array(0);  // a float32 may straddle two network reads
      for (;;) {
        const {value, done} = await reader.read();
        if (done || this.jobId !== jobId) break;
        if (this.stats.firstByteAt === null) {
          this.stats.firstByteAt = performance.now();
          this.stats.state = 'buffering';
          this.watchText(jobId, signal);
        }
        let bytes = value;
        if (carry.length) {
          bytes = new Uint8Array(carry.length + value.length);
          bytes.set(carry, 0);
          bytes.set(value, carry.length);
        }
        const usable = bytes.length - (bytes.length % 4);
        carry = bytes.slice(usable);
        if (!usable) continue;
        // Copy into an aligned buffer we can transfer to the audio thread.
        const samples = new Float32Array(bytes.slice(0, usable).buffer);
        this.stats.samplesReceived += samples.length;
        this.stats.arrivals.push([performance.now(), this.stats.samplesReceived]);  // for the latency benchmark
        this.node.port.postMessage({type: 'push', jobId, samples}, [samples.buffer]);
        if (this.stats.auto && this.stats.firstPlayAt === null) this.autoBuffer(jobId);
      }
      if (this.jobId === jobId) {
        this.stats.streamDone = true;
        this.render();
        this.node.port.postMessage({type: 'end', jobId});
        if (this.stats.samplesReceived === 0) {
          this.stats.state = 'ended';
          this.finishStats();
        }
      }
    }

    // The automatic start buffer. A stream that arrives at r audio seconds per second (r < 1)
    // and lasts T seconds plays without a gap from the moment A seconds have arrived, where
    // A >= T (1 - r): until then the player holds. r is measured on this stream once it has come
    // for MEASURE_S over at least three chunks (audio after the first chunk / time since it: the
    // first chunks can be a backlog that arrives in one burst, measured at 3x the pace that
    // followed), before that the server's hint (X-Gepard-Speed); T is the text's expected length
    // (0.7 + 0.4 s per word, the authors' scorer), raised when more has already arrived. The pace
    // may fall after the start (another visitor's stream joins the batch, the CPU is shared): r
    // counts as r / PACE_MARGIN; then 10% and 0.2 s of margin. r / PACE_MARGIN >= 1.1 (well
    // faster than real time): start now.
    autoBuffer(jobId) {
      const s = this.stats, a = s.auto;
      const got = s.samplesReceived / SAMPLE_RATE;
      a.pushes += 1;
      if (a.pushes === 1) a.firstChunkS = got;
      const since = (performance.now() - s.firstByteAt) / 1000;
      const measured = a.pushes >= 3 && since >= MEASURE_S ? (got - a.firstChunkS) / since : null;
      // A long text's later segments are made beside the one playing. The audio plays in order: what
      // was made in order beyond what was sent (text.ahead_s) comes as fast as the codec decodes it,
      // the rest at the pace of the earliest segment still being made (text.rate): A + G >= T (1 - R).
      // A long text's later segments join the batch once its first chunk is out, and its pace falls
      // then: neither the host's hint (one stream's pace) nor the first chunk says it, so a text
      // that may be long starts only on a pace measured on this stream, the lower of the arrivals'
      // and the server's (the earliest unfinished segment's recent frames: segments.progress).
      const text = s.longText;
      const own = measured !== null ? measured : (a.maybeLong ? null : a.hint);
      const rate = text && text.rate ? (measured !== null ? Math.min(text.rate, measured) : null) : own;
      const ready = text ? text.ahead_s : 0;
      a.rate = rate;
      a.basis = rate === null ? null : text && text.rate ? 'text' : measured !== null ? 'measured' : 'hint';
      a.expectedS = Math.max(a.expectedS, got + 0.5);
      let need;
      if (rate !== null && rate / PACE_MARGIN >= 1.1) need = 0;  // well ahead of real time: start now
      else if (rate === null) need = null;  // no hint and not measured yet: keep holding
      else need = Math.max(0, a.expectedS * Math.max(0, 1 - rate / PACE_MARGIN) * 1.1 + 0.2 - ready);
      a.needS = need;
      if (need !== null) {
        const prebuffer = Math.max(1, Math.round(need * SAMPLE_RATE));
        a.plans.push({prebuffer, needS: need, rate, expectedS: a.expectedS, basis: a.basis});
        this.node.port.postMessage({type: 'prebuffer', jobId, prebuffer});
      }
      this.render();
    }

    // Stop playback and the download; returns the id of the job that was playing.
    // reason: the state to record ('stopped' by default, 'replaced', 'failed').
    stop(reason) {
      const jobId = this.jobId;
      if (this.abort) this.abort.abort();
      this.abort = null;
      if (jobId) {
        if (this.node) this.node.port.postMessage({type: 'reset', jobId: null});
        if (this.stats.state !== 'ended') this.stats.state = reason || 'stopped';
        this.finishStats();
      }
      this.jobId = null;
      this.render();
      return jobId || '';
    }

    // The Generate request failed (bad input, or rejected before it ran): if its stream
    // has not delivered anything, nothing ever will, so close it.
    failed() {
      if (this.jobId && this.stats.samplesReceived === 0) this.stop('failed');
    }

    finishStats() {
      this.stats.contextState = this.ctx ? this.ctx.state : null;
      if (!this.history.length || this.history[this.history.length - 1] !== this.stats) {
        this.history.push(this.stats);
      }
      this.listeners.forEach((f) => { try { f(this.stats); } catch (e) {} });
    }

    sampleOutput() {
      if (!this.jobId || this.stats.state !== 'playing') return;
      this.analyser.getFloatTimeDomainData(this.tapBuf);
      let peak = 0;
      for (let i = 0; i < this.tapBuf.length; i++) peak = Math.max(peak, Math.abs(this.tapBuf[i]));
      this.stats.outputPeak = Math.max(this.stats.outputPeak, peak);
    }

    // The worklet's frame counter -> performance.now() time at which that frame is heard.
    frameToPerf(frame) {
      const ts = this.ctx.getOutputTimestamp ? this.ctx.getOutputTimestamp() : null;
      const t = frame / this.ctx.sampleRate;
      if (ts && ts.performanceTime > 0) return ts.performanceTime + (t - ts.contextTime) * 1000;
      const lat = (this.ctx.outputLatency || this.ctx.baseLatency || 0);
      return performance.now() + (t - this.ctx.currentTime + lat) * 1000;
    }

    onWorklet(m) {
      if (m.jobId !== this.jobId || !m.jobId) return;
      const s = this.stats;
      s.samplesPlayed = m.played;
      // The last of them is heard at this performance.now() time: the audio thread renders ahead
      // of the output (by its latency, more in bursts on a loaded host); heardSeconds reads it.
      s.playedHeardAt = this.frameToPerf(m.frame);
      s.underruns = m.underruns;
      s.gapMs = m.gapFrames * 1000 / this.ctx.sampleRate;
      s.contextState = this.ctx.state;
      this.noteHeard();
      if (m.type === 'started') {
        s.firstPlayAt = this.frameToPerf(m.firstFrame);
        s.clickToSoundMs = s.firstPlayAt - s.clickAt;
        s.outputLatencyMs = (this.ctx.outputLatency || this.ctx.baseLatency || 0) * 1000;
        s.startBufferMs = m.buffered * 1000 / this.ctx.sampleRate;  // queued when it started
        // Queued when it decided to start, and the buffer it held for: the plan, apart from
        // how late the audio thread then ran.
        s.readyBufferMs = m.ready * 1000 / this.ctx.sampleRate;
        s.startPrebufferMs = m.prebuffer * 1000 / this.ctx.sampleRate;
        // A push can re-plan before this message arrives (the audio thread started on an earlier
        // plan): the stats keep the plan it started on.
        const plan = s.auto && s.auto.plans.filter((p) => p.prebuffer === m.prebuffer).pop();
        if (plan) Object.assign(s.auto, {needS: plan.needS, rate: plan.rate, expectedS: plan.expectedS, basis: plan.basis});
        s.state = 'playing';
      } else if (m.type === 'underrun') {
        // Where each gap was heard (audio seconds into the stream), how long, and what had come by then.
        // ...and when it began to be heard (starvedAt: performance.now() time, the worklet's frame clock).
        s.gaps.push({atS: m.played / this.ctx.sampleRate, ms: m.frames * 1000 / this.ctx.sampleRate,
                     receivedS: m.received / this.ctx.sampleRate, at: performance.now(),
                     starvedAt: this.frameToPerf(m.at)});
      } else if (m.type === 'done') {
        s.state = 'ended';
        s.doneAt = performance.now();
        this.finishStats();
      }
      this.render();
    }

    // The line next to the button, in words: what the request is doing right now.
    render() {
      const el = document.getElementById('gepard-player-status');
      if (!el) return;
      const s = this.stats;
      const played = (s.samplesPlayed / SAMPLE_RATE).toFixed(1);
      const total = (s.samplesReceived / SAMPLE_RATE).toFixed(1);
      const words = {
        idle: 'Ready.',
        connecting: s.queue ? s.queue.text : 'Starting…',
        buffering: s.auto && s.auto.needS > 0
          ? `Buffering: ${total} of ${s.auto.needS.toFixed(1)} s of audio, about ` +
            `${Math.max(0, (s.auto.needS - s.samplesReceived / SAMPLE_RATE) / Math.max(s.auto.rate || 0, 0.05)).toFixed(0)} s ` +
            `more (generation runs at ${(s.auto.rate || 0).toFixed(2)}x real time, about ` +
            `${s.auto.expectedS.toFixed(0)} s of speech expected), then it plays without a gap`
          : 'Generating… first audio arriving',
        playing: s.streamDone ? `Generated, playing… ${played} of ${total} s`
                              : `Generating and playing… ${played} s played`,
        ended: `Done: played ${played} s`,
        stopped: `Stopped after ${played} s.`,
        replaced: 'Replaced by a new request.',
        failed: 'Not generated (see the message).',
        error: 'Player error',
      };
      let text = words[s.state] || s.state;
      const ahead = ['buffering', 'playing'].includes(s.state) ? this.readyAhead() : null;
      if (ahead) {
        const audioAhead = Math.max(0, (s.samplesReceived - s.samplesPlayed) / SAMPLE_RATE) + (s.longText.ahead_s || 0);
        text += ` · ${ahead.done} of ${ahead.segments} segments made, ${ahead.ready} of the ${ahead.after} after ` +
                `this one ready ahead of playback (${audioAhead.toFixed(0)} s of audio)`;
      }
      if (s.heardWaits.length) {
        text += ` · from each sentence's last word to its sound: ${s.heardWaits.map((w) => w.toFixed(2)).join(', ')} s`;
      }
      if (s.clickToSoundMs !== null && s.state !== 'connecting') {
        text += ' · click→sound ' + Math.round(s.clickToSoundMs) + ' ms';
      }
      if (!['idle', 'connecting'].includes(s.state)) text += ' · gaps ' + s.underruns;
      if (s.error) text += ' · ' + s.error;
      el.textContent = text;
      el.dataset.state = s.state;
      el.dataset.waiting = s.queue ? '1' : '0';
    }
  }

  const player = new GepardPlayer();
  window.gepardPlayer = player;
  const unlock = () => player.unlock();
  window.addEventListener('pointerdown', unlock, {capture: true, passive: true});
  window.addEventListener('keydown', unlock, {capture: true, passive: true});
  // Load the worklet early so the click path only has to resume the context.
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', () => player.init());
  } else {
    player.init();
  }
})();
