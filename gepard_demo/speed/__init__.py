"""Speed paths the engine composes, each in its own module (import them directly; this package
imports nothing heavy, so entry points can add its flags before torch loads):

- settings.py  SpeedSettings: device, precision, threads, pipelined (+ why it was picked)
- quantize.py  lower-precision backbone weights: dynamic int8 linears, bf16, fp16
- pipeline.py  PipelinedEngine: the talker on its own thread, ahead of the codec
- select.py    detect_hardware, pick_speed (the fastest path that passes here), apply_speed
- flags.py     --precision / --threads / --pipeline for every entry point
- fidelity.py  the guard a fast path must pass: teacher-forced KL / p_stop vs fp32, codec SNR
"""
