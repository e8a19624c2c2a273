// The automatic start buffer: how much of a stream the player holds before it plays, from the
// pace the stream comes at and the text's expected length (docs/DESIGN.md, "The automatic start
// buffer"; the rule is at plan()). It computes and records its figures in stats.auto; the player
// posts each plan to the worklet (`prebuffer` messages). A manual buffer (the slider) is a fixed
// hold, with no stats.auto.
//
// Loaded before player.js, which builds it (window.gepardPlayerParts.StartBuffer).
(function (parts) {
  const MEASURE_S = 0.25;  // the pace is measured over this long at least (and three chunks)
  const PACE_MARGIN = 1.25;  // ... and planned for as this much slower
  const HOLD_ALL = 1 << 30;  // samples: more than any stream, so the worklet holds until a plan

  class StartBuffer {
    // expected: the authors' scorer's expected length of an utterance (units.expected_speech_s:
    // baseS + perWordS a word, at least one word); segmentChars: a text longer than this may be
    // split into segments (text_input.py).
    constructor(sampleRate, expected, segmentChars) {
      this.rate = sampleRate;
      this.expected = expected;
      this.segmentChars = segmentChars;
    }

    expectedSeconds(words) { return this.expected.baseS + this.expected.perWordS * Math.max(1, words); }

    // The hold a new job starts with, in samples (opts: the click's {auto, prebufferMs, words, chars}).
    // Auto: everything, until the stream's pace says how much must be buffered (plan).
    firstHold(opts) {
      return opts && opts.auto ? HOLD_ALL : Math.round(((opts && opts.prebufferMs) || 0) * this.rate / 1000);
    }

    // stats.auto for a new job: the automatic buffer's figures, or null for a manual one.
    fresh(opts) {
      if (!(opts && opts.auto)) return null;
      return {expectedS: this.expectedSeconds(opts.words || 0), rate: null, hint: null, needS: null, pushes: 0,
              firstChunkS: null, basis: null, plans: [], maybeLong: (opts.chars || 0) > this.segmentChars};
    }

    // A stream that arrives at r audio seconds per second (r < 1) and lasts T seconds plays without
    // a gap from the moment A seconds have arrived, where A >= T (1 - r): until then the player
    // holds. r is measured on this stream once it has come for MEASURE_S over at least three chunks
    // (audio after the first chunk / time since it: the first chunks can be a backlog that arrives
    // in one burst, measured at 3x the pace that followed), before that the server's hint
    // (X-Gepard-Speed); T is the text's expected length (0.7 + 0.4 s per word, the authors'
    // scorer), raised when more has already arrived. The pace may fall after the start (another
    // visitor's stream joins the batch, the CPU is shared): r counts as r / PACE_MARGIN; then 10%
    // and 0.2 s of margin. r / PACE_MARGIN >= 1.1 (well faster than real time): start now.
    // Called on each push and each long-text progress until playback starts: the hold to post (in
    // samples, the plan kept in stats.auto.plans), or null: keep holding.
    plan(s) {
      const a = s.auto;
      const got = s.samplesReceived / this.rate;
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
      if (need === null) return null;
      const prebuffer = Math.max(1, Math.round(need * this.rate));
      a.plans.push({prebuffer, needS: need, rate, expectedS: a.expectedS, basis: a.basis});
      return prebuffer;
    }

    // The audio thread started on the hold `prebuffer`. A push can re-plan before its message
    // arrives (it started on an earlier plan): stats.auto keeps the plan it started on.
    startedOn(a, prebuffer) {
      const plan = a && a.plans.filter((p) => p.prebuffer === prebuffer).pop();
      if (plan) Object.assign(a, {needS: plan.needS, rate: plan.rate, expectedS: plan.expectedS, basis: plan.basis});
    }
  }

  parts.StartBuffer = StartBuffer;
})(window.gepardPlayerParts = window.gepardPlayerParts || {});
