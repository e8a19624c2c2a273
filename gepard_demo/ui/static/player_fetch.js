// The player's fetches for a job: its raw PCM (GET /gepard/pcm/{job}, audio_route.py), read as it
// streams and handed to the worklet, and its polls of the queue route (GET /gepard/queue/{job},
// queue_line.py): where a request that has not started stands (the wait line), and how far a long
// text's later segments are. Each ends when the player moves on to another job or stops (its
// abort signal).
//
// The queue route's states are declared once, in Python (queue_line.QueueState): they come with
// the player's config (queueStates), and this file reads them as `this.states.<name>`, never as
// its own string literals (tests/ui/jobs/test_queue_line.py holds the two sides to the same names).
//
// Loaded before player.js, which builds it (window.gepardPlayerParts.PlayerFetch).
(function (parts) {
  const UNKNOWN_POLLS = 5;  // a long text's progress: 'unknown' answers in a row (100 ms apart) before it gives up (watchText)
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  class PlayerFetch {
    // player: the GepardPlayer (its jobId and stats, and what it does with the audio: post,
    // autoBuffer, noteHeard, render, finishStats); routes: {pcmPrefix, queuePrefix, queueStates}.
    constructor(player, routes) {
      this.player = player;
      this.pcmPrefix = routes.pcmPrefix;
      this.queuePrefix = routes.queuePrefix;
      this.states = Object.fromEntries(routes.queueStates.map((name) => [name, name]));
    }

    current(jobId) { return this.player.jobId === jobId; }

    queueAnswer(jobId, signal) {
      return fetch(this.queuePrefix + encodeURIComponent(jobId), {signal, cache: 'no-store'});
    }

    // While no audio has come, ask where the request stands (place in line, wait estimate).
    async watchQueue(jobId, signal) {
      const p = this.player;
      await sleep(400);  // a request that starts at once never shows a wait
      while (this.current(jobId) && !signal.aborted && p.stats.firstByteAt === null) {
        try {
          const r = await this.queueAnswer(jobId, signal);
          if (r.ok) {
            const q = await r.json();
            if (!this.current(jobId)) return;
            p.stats.queue = q.state === this.states.queued ? q : null;
            p.render();
          }
        } catch (err) { return; }
        await sleep(1000);
      }
      if (this.current(jobId)) { p.stats.queue = null; p.render(); }
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
      const p = this.player;
      let unknown = 0;
      while (this.current(jobId) && !signal.aborted) {
        try {
          const r = await this.queueAnswer(jobId, signal);
          if (!r.ok) return;
          const q = await r.json();
          if (!this.current(jobId)) return;
          unknown = q.state === this.states.unknown ? unknown + 1 : 0;
          if (q.long_text) {
            p.stats.longText = q.long_text;
            p.autoBuffer(jobId);
            p.noteHeard();
            p.render();
          }
          const over = q.state === this.states.finished || q.state === this.states.gone;  // gone: let go, no progress kept
          if (over || (q.state === this.states.running && !q.long_text) || unknown > UNKNOWN_POLLS) return;
        } catch (err) { return; }
        await sleep(unknown ? 100 : 500);
      }
    }

    // The PCM stream: float32 little-endian mono, in network reads of any length, each read's whole
    // samples pushed to the worklet as they come (so playback starts on the first chunk).
    async pump(jobId, signal) {
      const p = this.player;
      const resp = await fetch(this.pcmPrefix + encodeURIComponent(jobId), {signal, cache: 'no-store'});
      if (!resp.ok) throw new Error('audio stream: HTTP ' + resp.status);
      p.stats.responseAt = performance.now();
      if (p.stats.auto) {
        const hint = Number(resp.headers.get('X-Gepard-Speed'));
        p.stats.auto.hint = Number.isFinite(hint) && hint > 0 ? hint : null;
      }
      const reader = resp.body.getReader();
      let carry = new Uint8Array(0);  // a float32 may straddle two network reads
      for (;;) {
        const {value, done} = await reader.read();
        if (done || !this.current(jobId)) break;
        if (p.stats.firstByteAt === null) {
          p.stats.firstByteAt = performance.now();
          p.stats.state = 'buffering';
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
        p.stats.samplesReceived += samples.length;
        p.stats.arrivals.push([performance.now(), p.stats.samplesReceived]);  // for the latency benchmark
        p.post({type: 'push', jobId, samples}, [samples.buffer]);
        p.autoBuffer(jobId);
      }
      if (this.current(jobId)) {
        p.stats.streamDone = true;
        p.render();
        p.post({type: 'end', jobId});
        if (p.stats.samplesReceived === 0) {
          p.stats.state = 'ended';
          p.finishStats();
        }
      }
    }
  }

  parts.PlayerFetch = PlayerFetch;
})(window.gepardPlayerParts = window.gepardPlayerParts || {});
