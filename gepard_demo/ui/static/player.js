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
//
// This file holds the player's state, the audio graph and the worklet's messages; its parts are
// loaded before it (layout.PLAYER_SCRIPTS), each in a file of its own: player_fetch.js (the PCM
// stream and the queue route's polls), player_buffer.js (the automatic start buffer),
// player_clock.js (when each sample is heard), player_line.js (the line next to the button).
(function () {
  const CFG = window.GEPARD_PLAYER_CONFIG || {};
  const SAMPLE_RATE = CFG.sampleRate || 22050;
  const WORKLET_URL = CFG.workletUrl || '/gepard/pcm-worklet.js';
  const GAIN = CFG.gain || 1.0;  // below 1 on random-weight models: their noise plays quieter
  const {PlayerClock, StartBuffer, PlayerFetch, PlayerLine} = window.gepardPlayerParts;

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
      this.clock = new PlayerClock(SAMPLE_RATE, () => this.ctx);
      this.buffer = new StartBuffer(SAMPLE_RATE, CFG.expected || {baseS: 0.7, perWordS: 0.4}, CFG.segmentChars || 400);
      this.fetches = new PlayerFetch(this, {pcmPrefix: CFG.pcmPrefix || '/gepard/pcm/',
                                            queuePrefix: CFG.queuePrefix || 'gepard/queue/',
                                            queueStates: CFG.queueStates || []});
      this.line = new PlayerLine(SAMPLE_RATE);
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
      const prebuffer = this.buffer.firstHold(opts);
      this.stats.auto = this.buffer.fresh(opts);
      const controller = new AbortController();
      this.abort = controller;
      this.render();
      this.fetches.watchQueue(jobId, controller.signal);
      // Resume inside the user gesture (autoplay policy), then stream.
      this.init().then(() => {
        if (this.ctx.state !== 'running') this.ctx.resume();
        this.post({type: 'reset', jobId, prebuffer});
        return this.fetches.pump(jobId, controller.signal);
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

    // A message to the audio thread (the worklet: reset, push, prebuffer, end).
    post(message, transfer) {
      this.node.port.postMessage(message, transfer || []);
    }

    // The automatic start buffer, on each push and each long-text progress until playback starts
    // (player_buffer.js): it tells the worklet each plan it makes.
    autoBuffer(jobId) {
      if (!this.stats.auto || this.stats.firstPlayAt !== null) return;
      const prebuffer = this.buffer.plan(this.stats);
      if (prebuffer !== null) this.post({type: 'prebuffer', jobId, prebuffer});
      this.render();
    }

    // Each sentence's wait to its sound, for a text written as it comes (player_clock.js).
    noteHeard() { this.clock.noteHeard(this.stats); }

    // The stream's second being heard now, or null (captions.js follows it; player_clock.js).
    heardSeconds() { return this.clock.heardSeconds(this.stats); }

    // Stop playback and the download; returns the id of the job that was playing.
    // reason: the state to record ('stopped' by default, 'replaced', 'failed').
    stop(reason) {
      const jobId = this.jobId;
      if (this.abort) this.abort.abort();
      this.abort = null;
      if (jobId) {
        if (this.node) this.post({type: 'reset', jobId: null});
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

    onWorklet(m) {
      if (m.jobId !== this.jobId || !m.jobId) return;
      const s = this.stats, clock = this.clock;
      s.samplesPlayed = m.played;
      // The last of them is heard at this performance.now() time: the audio thread renders ahead
      // of the output (by its latency, more in bursts on a loaded host); heardSeconds reads it.
      s.playedHeardAt = clock.frameToPerf(m.frame);
      s.underruns = m.underruns;
      s.gapMs = clock.framesMs(m.gapFrames);
      s.contextState = this.ctx.state;
      this.noteHeard();
      if (m.type === 'started') {
        s.firstPlayAt = clock.frameToPerf(m.firstFrame);
        s.clickToSoundMs = s.firstPlayAt - s.clickAt;
        s.outputLatencyMs = clock.latencyS() * 1000;
        s.startBufferMs = clock.framesMs(m.buffered);  // queued when it started
        // Queued when it decided to start, and the buffer it held for: the plan, apart from
        // how late the audio thread then ran.
        s.readyBufferMs = clock.framesMs(m.ready);
        s.startPrebufferMs = clock.framesMs(m.prebuffer);
        this.buffer.startedOn(s.auto, m.prebuffer);
        s.state = 'playing';
      } else if (m.type === 'underrun') {
        // Where each gap was heard (audio seconds into the stream), how long, and what had come by then.
        // ...and when it began to be heard (starvedAt: performance.now() time, the worklet's frame clock).
        s.gaps.push({atS: m.played / this.ctx.sampleRate, ms: clock.framesMs(m.frames),
                     receivedS: m.received / this.ctx.sampleRate, at: performance.now(),
                     starvedAt: clock.frameToPerf(m.at)});
      } else if (m.type === 'done') {
        s.state = 'ended';
        s.doneAt = performance.now();
        this.finishStats();
      }
      this.render();
    }

    // The line next to the button, in words: what the request is doing right now (player_line.js).
    render() { this.line.draw(this.stats); }
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
