// The player's line next to the Generate button (#gepard-player-status, layout.py): what the
// request is doing right now, in words, drawn from the job's stats alone; its state and whether it
// waits in line go in data attributes (the page's CSS and the tests read them).
//
// Loaded before player.js, which builds it (window.gepardPlayerParts.PlayerLine).
(function (parts) {
  class PlayerLine {
    constructor(sampleRate) { this.rate = sampleRate; }

    // A long text's segments wholly generated after the one now playing (its end in the stream: ends_s).
    readyAhead(s) {
      const t = s.longText;
      if (!t) return null;
      const played = s.samplesPlayed / this.rate;
      const playing = t.ends_s.filter((e) => e <= played).length;
      return {ready: t.generated.filter((g, i) => g && i > playing).length, after: t.segments - playing - 1,
              segments: t.segments, done: t.generated.filter((g) => g).length};
    }

    // The player's state in words.
    stateWords(s) {
      const played = (s.samplesPlayed / this.rate).toFixed(1);
      const total = (s.samplesReceived / this.rate).toFixed(1);
      const words = {
        idle: 'Ready.',
        connecting: s.queue ? s.queue.text : 'Starting…',
        buffering: s.auto && s.auto.needS > 0
          ? `Buffering: ${total} of ${s.auto.needS.toFixed(1)} s of audio, about ` +
            `${Math.max(0, (s.auto.needS - s.samplesReceived / this.rate) / Math.max(s.auto.rate || 0, 0.05)).toFixed(0)} s ` +
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
      return words[s.state] || s.state;
    }

    // The whole line: the state, then what a long text has ready ahead, each sentence's wait (text
    // written as it comes), click to sound, the gaps and any error.
    text(s) {
      let text = this.stateWords(s);
      const ahead = ['buffering', 'playing'].includes(s.state) ? this.readyAhead(s) : null;
      if (ahead) {
        const audioAhead = Math.max(0, (s.samplesReceived - s.samplesPlayed) / this.rate) + (s.longText.ahead_s || 0);
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
      return text;
    }

    draw(s) {
      const el = document.getElementById('gepard-player-status');
      if (!el) return;
      el.textContent = this.text(s);
      el.dataset.state = s.state;
      el.dataset.waiting = s.queue ? '1' : '0';
    }
  }

  parts.PlayerLine = PlayerLine;
})(window.gepardPlayerParts = window.gepardPlayerParts || {});
