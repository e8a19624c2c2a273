// The player's clock: when each sample of the stream is heard. The worklet counts frames on the
// AudioContext's clock; this maps a frame to the performance.now() time it reaches the listener
// (the time the page, its tests and the latency benchmark measure with), and from there says
// which second of the stream is heard now (captions.js lights the word said there) and when each
// sentence of a text written as it comes was first heard (stats.heardWaits).
//
// It keeps no state of its own: it reads the context the player built and the job's stats
// (samplesPlayed, playedHeardAt, state). Loaded before player.js, which builds it
// (window.gepardPlayerParts.PlayerClock).
(function (parts) {
  class PlayerClock {
    // sampleRate: the stream's; context(): the player's AudioContext (null until it is built).
    constructor(sampleRate, context) {
      this.rate = sampleRate;
      this.context = context;
    }

    // How long the output takes after the audio thread (s): what it renders is heard this late.
    latencyS() {
      const ctx = this.context();
      return ctx.outputLatency || ctx.baseLatency || 0;
    }

    // A count of the context's frames, in ms.
    framesMs(frames) {
      return frames * 1000 / this.context().sampleRate;
    }

    // The worklet's frame counter -> performance.now() time at which that frame is heard.
    frameToPerf(frame) {
      const ctx = this.context();
      const ts = ctx.getOutputTimestamp ? ctx.getOutputTimestamp() : null;
      const t = frame / ctx.sampleRate;
      if (ts && ts.performanceTime > 0) return ts.performanceTime + (t - ts.contextTime) * 1000;
      return performance.now() + (t - ctx.currentTime + this.latencyS()) * 1000;
    }

    // When (performance.now() time) the stream's second `pos` is heard, pos within what has played
    // (no gap since: a gap puts it earlier than it was).
    heardAt(s, pos) {
      return s.playedHeardAt - (s.samplesPlayed / this.rate - pos) * 1000;
    }

    // The stream's second being heard now: what the worklet has played, less what is still on its
    // way to the output (captions.js lights the word said there); null when none of it is heard
    // now (not started, stopped, or its last sample heard: an ended stream is still heard until then).
    heardSeconds(s) {
      if (s.playedHeardAt === null || !['playing', 'ended'].includes(s.state)) return null;
      const played = s.samplesPlayed / this.rate, left = (s.playedHeardAt - performance.now()) / 1000;
      if (s.state === 'ended' && left <= 0) return null;
      return Math.max(0, Math.min(played, played - left));
    }

    // Text written as it comes (FeedSettings "as written"): each sentence's wait from its last word
    // (written_s after the request's start, about the click) to its first sound, once its first
    // sample has played (when it was heard: heardAt, from the worklet's frame clock).
    noteHeard(s) {
      const t = s.longText;
      if (!t || !t.written_s || s.firstPlayAt === null) return;
      const played = s.samplesPlayed / this.rate;
      while (s.heardWaits.length < t.segments) {
        const k = s.heardWaits.length;
        const start = k === 0 ? 0 : t.ends_s[k - 1];
        if (start === undefined || played <= start) break;
        const at = k === 0 ? s.firstPlayAt : this.heardAt(s, start);
        s.heardWaits.push(Math.max(0, (at - s.clickAt) / 1000 - t.written_s[k]));
      }
    }
  }

  parts.PlayerClock = PlayerClock;
})(window.gepardPlayerParts = window.gepardPlayerParts || {});
