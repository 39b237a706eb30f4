"""The loopback provider simulator: real HTTP for the real SDK clients, with rate limits and
fault injection. For tests, the smoke profile and benchmarks only; never imported at run time
unless a profile asks for the simulator."""

from hbpsych_utils.llm.faults import FAULT_KINDS
from hbpsych_utils.llm.testing.simulator import (
    Fault,
    Simulator,
    SimulatorProcess,
    base_urls_for,
)

__all__ = ["FAULT_KINDS", "Fault", "Simulator", "SimulatorProcess", "base_urls_for"]
