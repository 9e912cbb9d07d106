"""Hot-key detectors and their scores: what a service (or a model of one) uses to find the
keys that are hot right now, and how well each finds them.

``sketch``: the sliding Space-Saving sketch ``hotshard serve`` mitigates by; ``sampler``: a
1-in-N sampler (Pelikan's way); ``score``: a known stream replayed through a detector and
scored against the truth (precision, recall, share error, detection latency).
"""
