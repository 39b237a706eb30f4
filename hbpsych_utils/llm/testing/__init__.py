"""The loopback provider simulator: real HTTP for the real SDK clients, with rate limits and
fault injection. For tests, the smoke profile and benchmarks only; never imported at run time
unless a profile asks for the simulator."""
