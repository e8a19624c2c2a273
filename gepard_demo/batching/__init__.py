"""One engine, several callers: continuous batching (issue 19).

- scheduler.py  `BatchScheduler`: owns the engine's talker; every caller's request decodes in one
                running batch (model/batch.py's DecodeBatch), admitted between steps
- tickets.py    a request's `Ticket` and `TicketFrames` (its FrameSteps), look-ahead segments among them
- admission.py  when a newcomer may join: the cap, and real time for the running streams
- codec_pool.py `CodecPool`: the streams' lined-up codec chunks decoded in one call (codec/batched.py)
"""
