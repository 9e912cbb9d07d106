"""Evidence -> ranked explanations: which cause fits a load test that missed production's p99.

The package is itself callable: ``hotshard.diagnose(production, baseline, ...)`` is
``hotshard.diagnose.engine.diagnose``. The package root's public API names the function
``diagnose``, and Python binds a subpackage to its parent's attribute of the same name as soon as
anything imports ``hotshard.diagnose.<module>``; a callable package keeps ``hotshard.diagnose(...)``
working whatever was imported before.
"""

import sys
import types

from hotshard.diagnose.findings import CAUSES, VERDICTS, Diagnosis, Finding, Recommendation

__all__ = ["CAUSES", "VERDICTS", "Diagnosis", "Finding", "Recommendation"]


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from hotshard.diagnose.engine import diagnose

        return diagnose(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
