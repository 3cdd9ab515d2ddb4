"""How to judge and show: metrics -> triage -> gate -> console / JSON / JUnit.

The public entry points are re-exported here; see each module for details.
"""
from conformance.report.evaluate import Finding, Row, evaluate, merge_rows
from conformance.report.gate import CATEGORIES, GateConfig, load_config
from conformance.report.messages import Offender

__all__ = ["CATEGORIES", "Finding", "GateConfig", "Offender", "Row", "evaluate", "load_config",
           "merge_rows"]
