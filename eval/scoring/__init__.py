"""Scoring audio: ASR, the text rules, and every per-utterance number and interval.

- audio.py              WAV in and out, 16 kHz resampling for ASR, VAD trimming
- asr.py                `Transcriber` (faster-whisper / openai-whisper), `ASRSettings`
- (offline Whisper weights and the CTranslate2 -> openai-whisper converter: gepard_demo/alignment,
  shared with the page's and the server's word aligner)
- transcript_cache.py   `CachedTranscriber`: each distinct audio transcribed once
- normalize.py          the text normalisation both sides of a WER get
- metrics.py            word errors, end deletions / insertions, length and stop-head figures
- bootstrap.py          percentile bootstrap CIs (plain and paired) over utterances
- rates.py              counts k/n of rare events with Wilson 95% intervals
- timing.py             VAD speech, silences, pauses, speaking rate, F0 (SwiftF0) of one utterance
- loops.py              loop detectors: repeated transcript n-grams, end insertions, repeating codec frames
- word_alignment.py     the WER's edit ops, each placed in time on the heard words
- naturalness.py        DNSMOS P.835 / P.808 (speechmos), guarded against empty and silent clips
- derail.py             the derail rule on the probe's entropy (`DerailRule`), flagged by frame N
- reward.py             the authors' reward and clean rollout (gepard-train score.py)
"""
