// AudioWorklet that plays float32 PCM pushed from the page, back to back, and measures itself.
//
// The page runs the AudioContext at the codec's own rate (22050 Hz), so samples go out as
// they came, with no resampling here. Each render quantum (128 frames) takes samples from a
// FIFO of chunks. Playback starts on the first sample (lowest latency).
//
// Gaps: once playing, a quantum that finds the FIFO empty before the stream has ended starts
// a starved spell. If the stream then ends with nothing more, that was just the end of speech.
// If more samples come, the listener heard a gap: it is counted (underruns, gapFrames) when
// playback resumes. On hardware slower than real time, resuming on every new chunk would
// stutter at every chunk; instead playback resumes only once `rebuffer` samples are queued,
// and that target doubles after each gap (0.5 s, 1 s, 2 s ... capped at 8 s): a few longer
// pauses instead of a stutter, the usual jitter-buffer trade.

const REBUFFER_START_S = 0.5;
const REBUFFER_MAX_S = 8;

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
    // Samples queued when the start condition was first met, as messages arrive: the player's
    // decision, apart from when the audio thread next runs (a loaded host can run it late).
    this.readyBuffered = -1;
    this.rebuffer = Math.round(REBUFFER_START_S * sampleRate);
    this.sinceReport = 0;
    this.doneReported = false;
  }

  onMessage(msg) {
    if (msg.type === 'reset') {
      this.reset(msg.jobId);
      this.prebuffer = msg.prebuffer || 0;
    } else if (msg.type === 'prebuffer') {
      // The page's automatic start buffer, refined as the stream arrives (until playback starts).
      if (msg.jobId === this.jobId && !this.started) this.prebuffer = msg.prebuffer;
    } else if (msg.type === 'push') {
      if (msg.jobId !== this.jobId) return;  // a late chunk of a stopped job
      const s = msg.samples;
      if (!s.length) return;
      this.queue.push(s);
      this.buffered += s.length;
      this.received += s.length;
    } else if (msg.type === 'end') {
      if (msg.jobId !== this.jobId) return;
      this.ended = true;
    }
    if (!this.started && this.readyBuffered < 0 && this.mayStart()) this.readyBuffered = this.buffered;
    if (msg.type === 'ping') {
      // Lets a caller know every earlier message has been handled (used by the tests).
      this.port.postMessage({type: 'pong', id: msg.id});
    }
  }

  report(type, extra) {
    this.port.postMessage(Object.assign({
      type, jobId: this.jobId, played: this.played, received: this.received,
      buffered: this.buffered, underruns: this.underruns, gapFrames: this.gapFrames,
      frame: currentFrame,
    }, extra || {}));
  }

  // Is enough queued to start (or has the stream ended)?
  mayStart() {
    return this.jobId !== null && this.buffered > 0 && (this.buffered >= Math.max(1, this.prebuffer) || this.ended);
  }

  // May samples flow in this quantum?
  flowing() {
    if (this.jobId === null || this.buffered === 0) return false;
    if (!this.started) return this.mayStart();
    if (this.starvedAt < 0) return true;
    if (this.buffered < this.rebuffer && !this.ended) return false;
    // Resuming after a gap the listener heard.
    this.underruns += 1;
    this.gapFrames += currentFrame - this.starvedAt;
    this.report('underrun', {at: this.starvedAt, frames: currentFrame - this.starvedAt});
    this.starvedAt = -1;
    this.rebuffer = Math.min(this.rebuffer * 2, Math.round(REBUFFER_MAX_S * sampleRate));
    return true;
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    const n = out.length;
    let i = 0;
    if (this.flowing()) {
      while (i < n && this.queue.length) {
        const head = this.queue[0];
        const take = Math.min(n - i, head.length - this.offset);
        out.set(head.subarray(this.offset, this.offset + take), i);
        if (!this.started) {
          this.started = true;
          this.report('started', {firstFrame: currentFrame + i, ready: this.readyBuffered,
                                  prebuffer: this.prebuffer});
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
    // Ran dry and the stream ended with nothing more: that was the end of speech, not a gap.
    if (this.ended && this.buffered === 0) this.starvedAt = -1;
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
