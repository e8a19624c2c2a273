// AudioWorklet that plays float32 PCM pushed from the page, back to back, and measures itself.
//
// The page runs the AudioContext at the codec's own rate (22050 Hz), so samples go out as
// they came, with no resampling here. Each render quantum (128 frames) takes samples from a
// FIFO of chunks. Once playback has started, a quantum that finds the FIFO empty before the
// stream has ended is the start of a gap; it is counted as an underrun only if more samples
// arrive afterwards (running dry right before 'end' arrives is the end of speech, not a gap).

class GepardPcmPlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.reset(null);
    this.port.onmessage = (e) => this.onMessage(e.data);
  }

  reset(jobId) {
    this.jobId = jobId;
    this.queue = [];       // Float32Array chunks not yet fully played
    this.offset = 0;       // read position inside queue[0]
    this.buffered = 0;     // samples waiting in the queue
    this.received = 0;
    this.played = 0;
    this.started = false;  // first sample has been output
    this.ended = false;    // the stream said it has no more samples
    this.starvedAt = -1;   // frame where the FIFO ran dry mid-stream, -1 when not starved
    this.underruns = 0;
    this.gapFrames = 0;
    this.prebuffer = 0;    // samples to hold before starting (0 = start on the first sample)
    this.sinceReport = 0;
    this.doneReported = false;
  }

  onMessage(msg) {
    if (msg.type === 'reset') {
      this.reset(msg.jobId);
      this.prebuffer = msg.prebuffer || 0;
    } else if (msg.type === 'push') {
      if (msg.jobId !== this.jobId) return;  // a late chunk of a stopped job
      const s = msg.samples;
      if (!s.length) return;
      if (this.starvedAt >= 0) {
        // Real gap: the listener heard silence between two samples of the utterance.
        this.underruns += 1;
        this.gapFrames += currentFrame - this.starvedAt;
        this.port.postMessage({type: 'underrun', jobId: this.jobId, at: this.starvedAt,
                               frames: currentFrame - this.starvedAt, underruns: this.underruns});
        this.starvedAt = -1;
      }
      this.queue.push(s);
      this.buffered += s.length;
      this.received += s.length;
    } else if (msg.type === 'end') {
      if (msg.jobId !== this.jobId) return;
      this.ended = true;
      this.starvedAt = -1;
    }
  }

  report(type, extra) {
    this.port.postMessage(Object.assign({
      type, jobId: this.jobId, played: this.played, received: this.received,
      buffered: this.buffered, underruns: this.underruns, gapFrames: this.gapFrames,
      frame: currentFrame,
    }, extra || {}));
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    const n = out.length;
    let i = 0;
    const canStart = this.started || this.buffered >= Math.max(1, this.prebuffer) ||
      (this.ended && this.buffered > 0);
    if (this.jobId !== null && canStart) {
      while (i < n && this.queue.length) {
        const head = this.queue[0];
        const take = Math.min(n - i, head.length - this.offset);
        out.set(head.subarray(this.offset, this.offset + take), i);
        if (!this.started) {
          this.started = true;
          this.report('started', {firstFrame: currentFrame + i});
        }
        i += take;
        this.offset += take;
        this.buffered -= take;
        this.played += take;
        if (this.offset >= head.length) {
          this.queue.shift();
          this.offset = 0;
        }
      }
    }
    if (i < n) {
      out.fill(0, i);
      if (this.started && !this.ended && this.starvedAt < 0) this.starvedAt = currentFrame + i;
    }
    if (this.started && this.ended && this.buffered === 0 && !this.doneReported) {
      this.doneReported = true;
      this.report('done');
    }
    this.sinceReport += n;
    if (this.jobId !== null && this.sinceReport >= 1024) {  // ~46 ms at 22.05 kHz
      this.sinceReport = 0;
      this.report('progress');
    }
    return true;
  }
}

registerProcessor('gepard-pcm-player', GepardPcmPlayer);
