"""Evidence -> ranked explanations: which cause fits a load test that missed production's p99."""

from hotshard.diagnose.model import CAUSES, VERDICTS, Diagnosis, Finding, Recommendation

__all__ = ["CAUSES", "VERDICTS", "Diagnosis", "Finding", "Recommendation"]
